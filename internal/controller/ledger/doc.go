// Package ledger keeps Lachesis's own record of every job's attained service
// in SQLite (WAL mode).
//
// Slurm resets a job's start, submit and suspend times when it requeues the
// job, so Slurm cannot say how much GPU time a preempted job has had across
// its runs. The ledger can: it records each run as the core sees it and keeps
// the total across requeues and slurmctld restarts. It also keeps the
// GPU-time of completed jobs, the history the 2D-Gittins index learns from.
//
// The ledger is written by one goroutine, in batches, never under
// slurmctld's locks; a kill -9 of slurmctld loses at most the last batch.
package ledger
