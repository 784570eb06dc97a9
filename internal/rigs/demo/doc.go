// Package demo runs `make demo`: one bundled workload on a loopback Slurm
// cluster, first under Lachesis (priority/tiresias + preempt/tiresias), then
// under Slurm's priority/multifactor, in the same run on the same cluster
// shape, and prints what happened: a live view of queues and attained
// service, then a per-job table and the average job completion times.
//
// ProfileDemo is `make demo-profile`: a real PyTorch training job
// (etc/demo/train_image.py) profiled through a real node agent, its profile
// stored by the controller, and a plain sbatch of the same model sized from
// it by job_submit/synergy.
package demo
