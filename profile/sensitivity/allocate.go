package sensitivity

import (
	"errors"
	"fmt"
	"math"
)

// ErrDoesNotFit is returned when a node cannot hold a job at all.
var ErrDoesNotFit = errors.New("job does not fit on node")

// Resources is an amount of GPUs, CPUs and memory: a node's capacity, or
// what is free on it.
type Resources struct {
	GPUs  int
	CPUs  int
	MemGB float64
}

// Outcome says how an allocation relates to the job's best case.
type Outcome uint8

const (
	// GotBestCase: the job got its best-case demand in full.
	GotBestCase Outcome = iota
	// FellBack: at least one resource was cut back toward the proportional
	// share because the node could not spare the best case.
	FellBack
)

func (o Outcome) String() string {
	if o == GotBestCase {
		return "best-case"
	}
	return "fell-back"
}

// Allocation is what one job gets on one node.
type Allocation struct {
	GPUs    int
	CPUs    int
	MemGB   float64
	Outcome Outcome
}

// PerGPU is the allocation's per-GPU CPUs and memory, the coordinates a
// Profile is indexed by.
func (a Allocation) PerGPU() (cpus, memGB float64) {
	if a.GPUs == 0 {
		return 0, 0
	}
	return float64(a.CPUs) / float64(a.GPUs), a.MemGB / float64(a.GPUs)
}

// Proportional is the GPU-proportional share of gpus GPUs on a node of this
// capacity: its fraction of the node's CPUs (rounded down) and memory.
func Proportional(capacity Resources, gpus int) Allocation {
	if capacity.GPUs <= 0 {
		return Allocation{GPUs: gpus}
	}
	return Allocation{
		GPUs:  gpus,
		CPUs:  capacity.CPUs * gpus / capacity.GPUs,
		MemGB: capacity.MemGB * float64(gpus) / float64(capacity.GPUs),
	}
}

// DefaultReserve keeps a full proportional share back for every other free
// GPU of a node (see Allocator.Reserve).
const DefaultReserve = 1.0

// Allocator decides CPUs and memory on nodes of one shape.
type Allocator struct {
	// Node is a node's capacity.
	Node Resources
	// Reserve is the fraction of the proportional share that is kept back
	// for each of the node's other free GPUs when a job asks for more than
	// its own share. Slurm cannot shrink a running job the way
	// Synergy-TUNE reclaims resources, so what one job takes beyond its
	// share is gone for the GPUs placed after it until it ends. At 1 (the
	// default) every free GPU keeps its full share, so no GPU is ever
	// stranded or slowed below the share by an earlier job; at 0 the first
	// jobs on a node take all they want and later ones may not fit.
	Reserve float64
}

// Proportional is the GPU-proportional share of gpus GPUs on the
// Allocator's node.
func (a Allocator) Proportional(gpus int) Allocation { return Proportional(a.Node, gpus) }

// Allocate decides the CPUs and memory of a job of gpus GPUs whose per-GPU
// best case is best, on a node with free resources free. For each of CPUs
// and memory, with the job's GPU-proportional share prop and its best case
// want = best × gpus:
//
//   - The node keeps Reserve × the proportional share of each of its other
//     free GPUs back; the job may use the rest of what is free (its
//     "headroom").
//   - The job gets want if it fits in the headroom (its best case), else as
//     much of the headroom as it can use, but never less than
//     min(want, prop): a job falls back toward the proportional share, not
//     below it, nor below its own best case.
//   - Never more than is free: if even that minimum is not free, or the node
//     lacks GPUs, the result is ErrDoesNotFit.
//
// An insensitive model (best case below the share) therefore always gets its
// small best case and leaves the rest for sensitive models on the same node.
func (a Allocator) Allocate(free Resources, gpus int, best Demand) (Allocation, error) {
	switch {
	case gpus <= 0 || a.Node.GPUs <= 0:
		return Allocation{}, fmt.Errorf("%w: %d GPUs on a node of %d", ErrDoesNotFit, gpus, a.Node.GPUs)
	case free.GPUs < gpus:
		return Allocation{}, fmt.Errorf("%w: %d GPUs wanted, %d free", ErrDoesNotFit, gpus, free.GPUs)
	}
	out, ok := a.TryAllocate(free, gpus, best)
	if !ok {
		prop := Proportional(a.Node, gpus)
		return Allocation{}, fmt.Errorf("%w: %d CPUs, %.1f GB free, at least %d CPUs, %.1f GB needed",
			ErrDoesNotFit, free.CPUs, free.MemGB, min(best.CPUsPerGPU*gpus, prop.CPUs),
			min(best.MemGBPerGPU*float64(gpus), prop.MemGB))
	}
	return out, nil
}

// TryAllocate is Allocate without the explanation: ok is false where
// Allocate returns ErrDoesNotFit. It does not allocate memory, for callers
// that try many nodes or many hypothetical states (a scheduler's search).
func (a Allocator) TryAllocate(free Resources, gpus int, best Demand) (Allocation, bool) {
	capacity := a.Node
	if gpus <= 0 || capacity.GPUs <= 0 || free.GPUs < gpus {
		return Allocation{}, false
	}
	prop := Proportional(capacity, gpus)
	others := Proportional(capacity, free.GPUs-gpus)
	reserve := min(max(a.Reserve, 0), 1)
	reserveCPUs := math.Ceil(reserve*float64(others.CPUs) - gridEpsilon)

	cpus, cutCPUs := grant(float64(best.CPUsPerGPU*gpus), float64(prop.CPUs),
		float64(free.CPUs), float64(free.CPUs)-reserveCPUs)
	mem, cutMem := grant(best.MemGBPerGPU*float64(gpus), prop.MemGB, free.MemGB, free.MemGB-reserve*others.MemGB)
	if cpus < 0 || mem < 0 {
		return Allocation{}, false
	}
	out := Allocation{GPUs: gpus, CPUs: int(cpus), MemGB: mem, Outcome: GotBestCase}
	if cutCPUs || cutMem {
		out.Outcome = FellBack
	}
	return out, true
}

// grant applies Allocate's rule to one resource. It returns -1 when the
// minimum is not free, and whether want was cut.
func grant(want, prop, free, headroom float64) (float64, bool) {
	least := min(want, prop)
	g := min(want, max(headroom, least))
	if g > free+gridEpsilon {
		return -1, true
	}
	return g, g < want
}
