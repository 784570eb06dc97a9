package profile

import (
	"fmt"
	"math"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// MaxGPUs bounds Record.GPUs: no node has more GPUs than this.
const MaxGPUs = 1024

// ErrImplausible is wrapped by every error Check returns; it is
// sensitivity.ErrImplausible, so one errors.Is covers both.
var ErrImplausible = sensitivity.ErrImplausible

// Check reports whether the record is one the controller may size jobs
// from: its best case within sensitivity's bounds (Demand.Check), a GPU
// count a node can have, a tolerance in [0, 1), and non-negative, finite
// measurements. Wire-level checks (lengths, UTF-8) are the protocol's; this
// is about the numbers' meaning.
func (r Record) Check() error {
	if err := r.Best.Check(); err != nil {
		return fmt.Errorf("best case: %w", err)
	}
	if r.GPUs < 0 || r.GPUs > MaxGPUs {
		return fmt.Errorf("%w: %d GPUs (allowed 0 to %d)", ErrImplausible, r.GPUs, MaxGPUs)
	}
	if !(r.Tolerance >= 0 && r.Tolerance < 1) {
		return fmt.Errorf("%w: tolerance %.4g (allowed [0, 1))", ErrImplausible, r.Tolerance)
	}
	if r.DatasetBytes < 0 || !nonNegative(r.DiskBW) || !nonNegative(r.MemBW) {
		return fmt.Errorf("%w: negative or non-finite dataset size or bandwidth", ErrImplausible)
	}
	for _, m := range r.CPUSweep {
		if m.CPUs <= 0 || m.CPUs > MaxGPUs*sensitivity.MaxCPUsPerGPU || !nonNegative(m.Throughput) || !nonNegative(m.Seconds) {
			return fmt.Errorf("%w: sweep point of %d CPUs, throughput %.4g, %.4g s", ErrImplausible, m.CPUs, m.Throughput, m.Seconds)
		}
	}
	return nil
}

func nonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }
