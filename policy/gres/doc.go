// Package gres is the one reader of a job's GPU request as Slurm holds it:
// the TRES-per-* strings ("gres:gpu:2", "gres:gpu:a100:4,gres:nic:1",
// "gres/gpu=2") as GPU counts (GPUs, Request.Total), the GPUs a job needs
// on one node and whether Slurm may spread them (Request.GPUsPerNode,
// Request.Spreadable), whether it names a GPU type (Request.Typed), whether it asks for a
// share of a GPU, gres/shard or gres/mps (AsksForGPUShare), and
// --cpus-per-gpu / --mem-per-gpu (CPUsPerGPU, MemMBPerGPU); and of a node's
// gres string, with the socket suffix slurmctld adds ("gpu:a100:4(S:0-1)"),
// as its GPUs and shards (NodeGPUs, Shards). Sizing
// (synergy), placement, the core's fallback and the C conversion (cgo) all
// use it, so one submission is read by one rule set. The job_submit plugin
// hands it the strings before Slurm has validated them: every parse is
// bounded and a malformed string is an error, never a count.
package gres
