// Package ctldbench measures Lachesis inside a real slurmctld against
// Slurm's own priority/multifactor, in one run on the same cluster shape
// and the same job queue: sbatch throughput while the queue fills, the
// Lachesis pass time (from slurmctld's own log lines) and slurmctld's CPU
// time over a fixed window. Figures are reported as ratios: absolute times
// on a shared 2-core machine are noise.
package ctldbench
