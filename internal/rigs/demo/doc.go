// Package demo runs `make demo`: one bundled workload on a loopback Slurm
// cluster, first under Lachesis (priority/tiresias + preempt/tiresias), then
// under Slurm's priority/multifactor, in the same run on the same cluster
// shape, and prints what happened: a live view of queues and attained
// service, then a per-job table and the average job completion times.
package demo
