// Package demo runs `make demo`: bundled workloads on a loopback Slurm
// cluster, each run twice in the same run on the same cluster shape (Part:
// Lachesis's priorities against priority/multifactor, Synergy's sizing
// against the GPU-proportional share; SharingPart: sharing off against on,
// with the node agent measuring GPU use on its fake GPU device), printing
// what happened: a live view of queues and attained service, then a
// per-job table and the figures side by side.
//
// ProfileDemo is `make demo-profile`: a real PyTorch training job
// (etc/demo/train_image.py) profiled through a real node agent, its profile
// stored by the controller, and a plain sbatch of the same model sized from
// it by job_submit/synergy.
package demo
