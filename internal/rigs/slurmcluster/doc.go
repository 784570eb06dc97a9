// Package slurmcluster drives the loopback Slurm cluster of
// scripts/cluster.sh from Go, and reads what Slurm's own clients (squeue,
// sprio, scontrol) say about jobs. The cluster tests, `make demo` and the
// slurmctld benchmark all use it, so they observe Lachesis the way an admin
// would: through Slurm, not through Lachesis's Go state.
package slurmcluster
