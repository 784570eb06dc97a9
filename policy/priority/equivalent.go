package priority

// Jobs without GPUs share Slurm's one priority order with GPU jobs, so they
// need attained service too: a job that never gains any stays in queue 0
// forever, above every demoted GPU job, however long it runs. Service is
// GPU-seconds, so such a job is charged in GPU-equivalents: the GPUs whose
// share of a node's CPUs its CPUs occupy. That is the rate Synergy's
// proportional share implies (a GPU comes with CPUs/GPUs of its node's
// CPUs), so a CPU-only job holding one GPU's worth of CPUs ages exactly like
// a 1-GPU job that holds the same CPUs.

// ChargedGPUs is the rate, in GPUs, at which a run accrues service. A job
// with GPUs is charged its GPUs. A job without GPUs is charged
// ceil(cpus / cpusPerGPU) GPU-equivalents, and at least 1: rounding up
// because a job that takes part of a GPU's CPU share leaves that GPU short
// of its share; at least 1 so that every running job is demoted in time,
// never more slowly than the smallest GPU job. cpusPerGPU 0 (unknown: a
// node without GPUs and no configured rate) charges the minimum, 1.
func ChargedGPUs(gpus, cpus, cpusPerGPU uint32) uint32 {
	if gpus > 0 {
		return gpus
	}
	if cpusPerGPU == 0 || cpus <= cpusPerGPU {
		return 1
	}
	return cpus/cpusPerGPU + min(cpus%cpusPerGPU, 1)
}
