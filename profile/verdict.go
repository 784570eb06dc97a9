package profile

import "math"

// BestCPUs is the best-case demand in CPUs for the whole workload (all its
// GPUs), the figure to compare with the node's cores.
func (r Record) BestCPUs() int { return r.Best.CPUsPerGPU * max(r.GPUs, 1) }

// MaxSweptCPUs is the largest CPU count the sweep measured: the node's
// limit, or MaxCPUs.
func (r Record) MaxSweptCPUs() int {
	n := 0
	for _, m := range r.CPUSweep {
		n = max(n, m.CPUs)
	}
	return n
}

// MayWantMoreCPUs reports whether the best case is every CPU the sweep
// could give: throughput was still climbing at the node's limit (or only
// one count could be measured), so the model may want more CPUs than this
// node has, and its best case is a lower bound.
func (r Record) MayWantMoreCPUs() bool {
	return len(r.CPUSweep) > 0 && r.BestCPUs() >= r.MaxSweptCPUs()
}

// PerGPUThroughput is the best throughput of the sweep per GPU, the
// figure that compares one model's speed across GPU types (the
// controller's profile store keeps it per model and type). ok is false
// when the record cannot be compared: no typed GPU, no point, or a
// throughput read from NVML's utilisation, which is near 100% on every
// type and so says nothing about how fast the type is.
func (r Record) PerGPUThroughput() (tput float64, ok bool) {
	if r.GPUType == "" || r.Signal == "nvml" {
		return 0, false
	}
	for _, m := range r.CPUSweep {
		tput = max(tput, m.Throughput)
	}
	if !(tput > 0) || math.IsInf(tput, 0) {
		return 0, false
	}
	return tput / float64(max(r.GPUs, 1)), true
}
