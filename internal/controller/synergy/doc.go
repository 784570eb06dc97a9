// Package synergy decides, at sbatch time, how many CPUs and how much memory
// per GPU a job gets: the best-case demand of its model's profile when the
// partition's nodes can hold it (which may be below the GPU-proportional
// share for models that gain nothing from more), else the proportional
// share of the partition's real nodes. Explicit user requests win unless the
// admin sets override. It is pure: the job_submit plugin copies the request
// and the partition's nodes in, applies the Decision it gets back, and
// records Decision.Reason in the job's admin comment.
package synergy
