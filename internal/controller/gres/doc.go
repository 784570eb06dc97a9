// Package gres parses Slurm's TRES-per-* request strings ("gres:gpu:2",
// "gres:gpu:a100:4,gres:nic:1", "gres/gpu=2") into GPU counts. It is used
// when slurmctld does not track gres/gpu as a TRES (then a job's GPU count
// exists only as these strings) and by the job_submit plugin, which sees the
// strings before Slurm has validated them.
package gres
