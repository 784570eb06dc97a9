package sensitivity

import "math"

// DefaultTolerance is the fraction of a model's maximum throughput that its
// best-case demand may give up. See the package documentation for why 2%.
const DefaultTolerance = 0.02

// Demand is a per-GPU amount of CPUs and memory.
type Demand struct {
	CPUsPerGPU  int
	MemGBPerGPU float64
}

// BestCase is the smallest per-GPU (CPUs, memory) grid point whose
// throughput is at least (1 − tolerance) × the profile's maximum, comparing
// CPUs first and memory second. It also returns that point's throughput.
// A tolerance outside [0, 1) is clamped into it.
func (p *Profile) BestCase(tolerance float64) (Demand, float64) {
	tolerance = min(max(tolerance, 0), math.Nextafter(1, 0))
	floor := (1 - tolerance) * p.Max()
	for i, c := range p.CPUs {
		for j, m := range p.MemGB {
			if v := p.Throughput[i][j]; v >= floor {
				return Demand{CPUsPerGPU: c, MemGBPerGPU: m}, v
			}
		}
	}
	// Unreachable: the maximum itself is >= floor.
	last := len(p.CPUs) - 1
	return Demand{CPUsPerGPU: p.CPUs[last], MemGBPerGPU: p.MemGB[len(p.MemGB)-1]}, p.Max()
}
