package sim

import (
	"fmt"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Shape is the simulated cluster: identical nodes.
type Shape struct {
	Nodes       int
	GPUsPerNode int
	CPUsPerNode int
	MemGBNode   float64
	// GPUCountOnly ignores nodes, CPUs and memory: the cluster is one pool
	// of Nodes × GPUsPerNode GPUs and a job fits when enough GPUs are free
	// anywhere (the Tiresias reference simulator's "count" placement).
	GPUCountOnly bool
}

// DefaultShape is 64 nodes like the servers the Synergy profiles come from:
// 8 GPUs, 24 CPUs and 500 GB each, so the proportional share of a GPU is
// the profiles' normalisation point (3 CPUs, 62.5 GB).
func DefaultShape() Shape {
	return Shape{Nodes: 64, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
}

// GPUs is the cluster's GPU count.
func (s Shape) GPUs() int { return s.Nodes * s.GPUsPerNode }

func (s Shape) String() string {
	if s.GPUCountOnly {
		return fmt.Sprintf("%d×%d GPUs (GPU counting only)", s.Nodes, s.GPUsPerNode)
	}
	return fmt.Sprintf("%d nodes × %d GPUs, %d CPUs, %g GB", s.Nodes, s.GPUsPerNode, s.CPUsPerNode, s.MemGBNode)
}

func (s Shape) validate() error {
	if s.Nodes <= 0 || s.GPUsPerNode <= 0 {
		return fmt.Errorf("%w: cluster of %d nodes × %d GPUs", ErrBadConfig, s.Nodes, s.GPUsPerNode)
	}
	if !s.GPUCountOnly && (s.CPUsPerNode < s.GPUsPerNode || !(s.MemGBNode > 0)) {
		return fmt.Errorf("%w: nodes need at least one CPU per GPU and some memory (got %d CPUs, %g GB for %d GPUs)",
			ErrBadConfig, s.CPUsPerNode, s.MemGBNode, s.GPUsPerNode)
	}
	return nil
}

// node is the capacity of one node as the allocator sees it.
func (s Shape) node() sensitivity.Resources {
	if s.GPUCountOnly {
		return sensitivity.Resources{GPUs: s.GPUs()}
	}
	return sensitivity.Resources{GPUs: s.GPUsPerNode, CPUs: s.CPUsPerNode, MemGB: s.MemGBNode}
}
