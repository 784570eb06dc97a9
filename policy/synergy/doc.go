// Package synergy decides, at sbatch time, how many CPUs and how much memory
// per GPU a job gets: the best-case demand of its model's profile when the
// partition's nodes can hold it (which may be below the GPU-proportional
// share for models that gain nothing from more), else the proportional
// share of the partition's real nodes. Explicit user requests win unless the
// admin sets override. It is pure: the job_submit plugin copies the request
// and the partition's nodes in, applies the Decision it gets back, and
// records Decision.Reason in the job's admin comment.
//
// Start-time sizing (start.go) sizes pending jobs again against what the
// nodes have free when they could start: Fallback lowers a waiting job to
// what a node with its GPUs free spares (FitOnNode), Restore raises a
// lowered or requeued one toward its profile's best case. The priority
// plugin's pass applies them through Slurm's job update; the simulator
// (sim's AllocStart) applies FitOnNode at every placement.
package synergy
