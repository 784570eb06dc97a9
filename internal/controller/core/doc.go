// Package core is the Go half of Lachesis inside slurmctld: one value, Core,
// that the thin C plugins call through the cgo shim in cgo/.
//
// Core turns Slurm's view of a job (a Snapshot copied out of job_record_t)
// into the policy's view (priority.Job) by keeping its own record of every
// job's attained service across runs (the ledger), ranks all jobs in one
// call per pass, and remembers each job's last decision so sprio and the
// preempt plugin can ask about it without another pass.
//
// Everything called under slurmctld's locks works on memory only. Ledger
// writes are handed to one writer goroutine; the Gittins distribution is
// reloaded by that goroutine too and swapped in atomically.
package core
