// Package chart draws Lachesis's charts with gonum.org/v1/plot: the
// profile chart (throughput against CPUs, with the tolerance band and the
// best case) for `lachesis-profiler show`, and the CDF of job completion
// times per policy for the simulator's results.
//
// Only tools import it: the core built into slurmctld must not link a
// plotting library, its fonts or image encoders.
package chart
