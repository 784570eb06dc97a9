// Package slurmcmd is Lachesis's one home for running Slurm's own client
// commands (scontrol, squeue), for the core inside slurmctld (requeues and
// ExcNodeList edits, from the requeuer goroutine, never under slurmctld's
// locks) and for the node agent (who owns a job that runs here, the node's
// GRES).
//
// Runner runs one command bounded: no shell, the binary found in Dir or on
// PATH, a timeout on top of the caller's context, stdout kept up to a size
// bound (more is an error, not a truncated answer), stderr captured into
// the error (cleaned of control characters and bounded), and a child that
// holds the pipes open cannot keep the caller waiting. The verbs (verbs.go)
// build each command from typed arguments and read its answer strictly:
// Slurm's output is not trusted further than its fields' shapes, since
// users control much of what Slurm prints about their jobs.
package slurmcmd
