// Package core is the Go half of Lachesis inside slurmctld: one value, Core,
// that the thin C plugins call through the cgo shim in cgo/.
//
// Core turns Slurm's view of a job (a Snapshot copied out of job_record_t)
// into the policy's view (priority.Job) by keeping its own record of every
// job's attained service across runs (the ledger), ranks all jobs in one
// call per pass, and remembers each job's last decision so sprio and the
// preempt plugin can ask about it without another pass.
//
// A pass (Core.Pass, core.go) is five stages, one file each, in this
// order: account (account.go: each snapshot folded into its record, its
// account charged), fairShare (fairshare.go: each job's account's factor),
// rank (rank.go: priority.Ranker, each result folded back into a record
// and a Decision), judgeSharing (sharing.go: GPU sharing and per-job GPU
// use, internal/controller/gpushare, judge the ranked jobs and their
// answers join the decisions) and forget (forget.go: the records of jobs
// slurmctld no longer has are closed). A stage's file holds the helpers
// that stage alone calls, in the order it calls them (account.go: the
// marker restored, the snapshot observed, a requeued run closed, the run
// charged and weighted, a finished job's end), so a pass reads top-down
// from Pass; helpers several stages share stay with their idea (the
// marker's format in restore.go, sweeps in siblings.go). GPU sharing and per-job GPU use are
// gpushare's, with their own state and lock; the core holds no sharing
// code and runs no Slurm command.
//
// Everything called under slurmctld's locks works on memory only. Ledger
// writes are handed to one writer goroutine (writer.go; the store's
// capabilities are the Ledger interface, checked against ledger.SQLite);
// the Gittins distribution is reloaded by that goroutine too and swapped in
// atomically. The locks and their order are written down at Core.
package core
