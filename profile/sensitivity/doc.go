// Package sensitivity turns a model's offline profile into a resource
// decision, the Synergy (OSDI'22) half of Lachesis.
//
// A Profile is a model's throughput measured (CPUs) and modelled (memory) at
// a grid of per-GPU allocations, normalised so that the GPU-proportional
// share is 1.0. From it the package derives:
//
//   - the best-case demand: the smallest per-GPU (CPUs, memory) whose
//     throughput is within a tolerance of the model's maximum
//     (Profile.BestCase);
//   - an allocation on a node (Allocator.Allocate): the best-case demand
//     when the node can hold it, else a fall-back toward the GPU-proportional
//     share, never more than the node has free.
//
// The package is pure Go with no I/O beyond the readers of the CSV formats
// it documents, so the job_submit plugin and the trace simulator share it.
//
// # Formats
//
// The throughput table (ReadThroughputCSV) has the header
//
//	model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput
//
// and one row per (model, CPUs, memory) point; every model must cover the
// full grid of its own CPU and memory values. The summary (ReadSummaryCSV)
// has the header
//
//	model,best_cpus_per_gpu,best_mem_gb_per_gpu,speedup_vs_proportional,iter_time_s,batch
//
// and is what Synergy's profiler reported as each model's best case; tests
// use it as the oracle for BestCase.
//
// # Choosing "smallest"
//
// Candidates are compared CPUs first, then memory: on the servers the
// profiles come from (8 GPUs, 24 CPUs, 500 GB) a GPU's proportional share is
// 3 CPUs but 62.5 GB, so CPUs are the scarcer resource and the one to save.
//
// # Tolerance
//
// DefaultTolerance (2%) reproduces every best case of the bundled summary.
// Any tolerance in [0, 3.87%) does; at 3.87% mobilenet's best case drops from
// 6 CPUs (throughput 1.55) to 5 CPUs (1.49), the closest call in the table.
// The summary writes the smallest memory column, 20.83 GB (a sixth of
// 125 GB), as "20"; BestCase returns the grid value 20.83.
package sensitivity
