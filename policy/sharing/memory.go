package sharing

import (
	"fmt"
	"math"
)

// The measured memory bound (AntMan's point: GPU memory is what a guest
// can take from its host outright, and slurm's gres/shard fences none of
// it). While an opportunistic job shares a GPU with guaranteed jobs, the
// guests may hold together at most what the guaranteed jobs leave: the
// GPU's memory, less the guaranteed jobs' measured peak, less a headroom
// (GuestMemoryHeadroomPct of the GPU's memory) for what a sampled peak
// misses (allocations between two samples, the allocator's
// fragmentation). A host's peak includes its current use, so a host
// whose memory grows until host and guests near the GPU's total shrinks
// the room below what the guests hold, and they go: the host is
// guaranteed. The bound is enforced after the fact, from the node
// agents' samples: a guest that grows faster than one sampling interval
// can still make its host fail an allocation once; the bound then
// requeues it, and MPS's per-client limit, where configured, is the only
// thing that stops the allocation itself (docs/how-it-works.md, Limits).

// DefaultGuestMemoryHeadroomPct is 10% of a GPU's memory (8 GiB of an
// 80 GiB GPU). The agent samples memory once a telemetry interval; a
// training step's activations come and go within one, and PyTorch's
// caching allocator reserves in blocks (its reserved memory, which NVML
// sees, runs some percent above what the tensors hold), so a peak seen
// between steps understates the peak within one.
const DefaultGuestMemoryHeadroomPct = 10

// MaxGuestMemoryHeadroomPct bounds the headroom: at 90% and above a guest
// could hold nothing beside any host.
const MaxGuestMemoryHeadroomPct = 90

// validateMemory checks GuestMemoryHeadroomPct (called by Validate).
func (c Config) validateMemory() error {
	h := c.GuestMemoryHeadroomPct
	if math.IsNaN(h) || h < 0 || h >= MaxGuestMemoryHeadroomPct {
		return fmt.Errorf("%w: guest_memory_headroom_pct %v must be in [0, %d)", ErrBadConfig, h, MaxGuestMemoryHeadroomPct)
	}
	return nil
}

// GuestMemoryRoom is the GPU memory (MiB) guests may hold together on a
// GPU of totalMB beside guaranteed jobs whose measured peak together is
// hostPeakMB: totalMB − hostPeakMB − the headroom, never below 0. NaN
// when totalMB is not a positive number (an agent that does not report
// it) or hostPeakMB is not a number ≥ 0: no room can be told.
func (c Config) GuestMemoryRoom(totalMB, hostPeakMB float64) float64 {
	if !(totalMB > 0) || math.IsInf(totalMB, 0) || !(hostPeakMB >= 0) || math.IsInf(hostPeakMB, 0) {
		return math.NaN()
	}
	return max(0, totalMB-hostPeakMB-totalMB*c.GuestMemoryHeadroomPct/100)
}

// MemoryOver says whether guests holding guestMB together on a GPU of
// totalMB exceed the room guaranteed jobs with a measured peak of
// hostPeakMB leave (GuestMemoryRoom): then a guest must go. A guest that
// holds nothing is never over; figures that are not numbers decide
// nothing (false), like Revert's.
func (c Config) MemoryOver(totalMB, hostPeakMB, guestMB float64) bool {
	room := c.GuestMemoryRoom(totalMB, hostPeakMB)
	return !math.IsNaN(room) && guestMB > 0 && !math.IsInf(guestMB, 0) && guestMB > room
}
