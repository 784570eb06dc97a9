package sensitivity

import (
	"errors"
	"fmt"
	"math"
)

// Bounds on a per-GPU demand any scheduler should act on. A profile is
// measured, so it cannot be trusted blindly: a broken or hostile agent can
// report 1e-9 GB (jobs starved to 1 MB per GPU) or 1e300 GB (numbers that
// overflow every conversion). The bounds are wide enough for any real
// server and narrow enough that sizing arithmetic (CPUs × GPUs per node,
// MB × GPUs per node) cannot overflow.
const (
	// MaxCPUsPerGPU: no server has more cores per GPU than this.
	MaxCPUsPerGPU = 512
	// MinMemGBPerGPU is 64 MiB: below it no training job starts at all.
	MinMemGBPerGPU = 64.0 / 1024
	// MaxMemGBPerGPU is 16 TiB per GPU, above any real server's memory.
	MaxMemGBPerGPU = 16 * 1024
)

// ErrImplausible is wrapped by every error Demand.Check returns.
var ErrImplausible = errors.New("implausible demand")

// Check reports whether d is a demand a scheduler may act on: a positive
// CPU count up to MaxCPUsPerGPU and a finite memory between MinMemGBPerGPU
// and MaxMemGBPerGPU.
func (d Demand) Check() error {
	switch {
	case d.CPUsPerGPU <= 0 || d.CPUsPerGPU > MaxCPUsPerGPU:
		return fmt.Errorf("%w: %d CPUs per GPU (allowed 1 to %d)", ErrImplausible, d.CPUsPerGPU, MaxCPUsPerGPU)
	case math.IsNaN(d.MemGBPerGPU) || d.MemGBPerGPU < MinMemGBPerGPU || d.MemGBPerGPU > MaxMemGBPerGPU:
		// %.4g keeps 1e300 and 1e-9 short in a log line.
		return fmt.Errorf("%w: %.4g GB per GPU (allowed %g to %g)", ErrImplausible, d.MemGBPerGPU, MinMemGBPerGPU, float64(MaxMemGBPerGPU))
	}
	return nil
}

// MemMB is the demand's memory per GPU in MB, rounded up. Call it only on
// a demand Check accepted: the conversion of an unchecked float is not
// defined for NaN or huge values.
func (d Demand) MemMB() uint64 { return uint64(math.Ceil(d.MemGBPerGPU * 1024)) }
