// Package placement decides, at sbatch time, where a GPU job of a known
// model should run on a cluster with several GPU types (issue 12, items 3
// and 4), using only what Slurm 22.05 already offers:
//
//   - Type preference by comparative advantage. Nodes carry a feature per
//     GPU type (e.g. Feature=gpu_a for Gres=gpu:a:N). For a job that names
//     no GPU type, no --constraint, no --prefer and no node list, the model's
//     speed on each type is compared with the other models' (from the
//     admin-editable table in lachesis.yaml), and the types where its
//     relative speed-up is largest go into the job's --prefer. Slurm 22.05
//     treats --prefer as soft: the scheduler queues the job twice, first
//     with the preferred features and then with its own --constraint, and
//     backfill only tries the preferred record for an immediate start, so
//     a job whose preferred nodes are busy starts elsewhere instead of
//     waiting (job_queue_append_internal in job_scheduler.c, the use_prefer
//     handling in backfill.c).
//   - Consolidation. A multi-GPU job asked for per job (--gpus=N, no -N) of
//     a model whose spread throughput is well below its consolidated one
//     gets max_nodes = the fewest nodes that can hold it; an insensitive
//     model is left free to spread.
//
// It is pure: the job_submit plugin copies the request and the partition's
// nodes in, applies the Placement and appends Placement.Reason to the job's
// admin comment. It never overrides what the user asked for and never makes
// a job unsatisfiable: a preferred feature must exist on a node of the
// partition, and the node cap is computed from the largest node there.
package placement
