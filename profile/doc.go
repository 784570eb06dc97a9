// Package profile is a model's profile as every part of Lachesis sees it:
// the Record a node agent measures, spools and delivers, the controller
// stores, and job_submit/synergy sizes jobs from, plus its text report.
//
// It is deliberately small and free of I/O: slurmctld's Go core and the
// wire protocol import it, and neither may link what measuring needs
// (NVML, cgroups, process control — profiler) or what drawing
// needs (internal/chart). The sensitivity matrices and the best-case
// demand rule live in profile/sensitivity, which the simulator shares.
package profile
