//go:build cgo

package main

import (
	"slices"
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/core"
)

// host is the running core as the C entry points see it: the core and the
// buffers its pass and fallback entry points reuse. The buffers belong to
// one core, so a re-init after the last fini starts with fresh ones.
//
// The methods take Go values only: each export converts its C arguments
// through the callbacks while mu is held, so every use of the buffers, from
// the first conversion to the last result copied out, is under mu.
// slurmctld runs one pass at a time, but mu makes that an invariant of
// ours, not an assumption about the caller.
type host struct {
	core *core.Core

	mu        sync.Mutex // guards the buffers below
	snaps     []core.Snapshot
	decisions []core.Decision
	nodes     []core.NodeState
}

func newHost(c *core.Core) *host { return &host{core: c} }

// pass ranks n jobs at now: snapshot(i) converts the caller's i-th job and
// decided(i, d) receives its decision. It returns core.Pass's count of
// fallback candidates.
func (h *host) pass(now int64, n int, snapshot func(i int) core.Snapshot, decided func(i int, d *core.Decision)) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.snaps = h.snaps[:0]
	for i := range n {
		h.snaps = append(h.snaps, snapshot(i))
	}
	h.decisions = slices.Grow(h.decisions[:0], n)[:n]
	candidates := h.core.Pass(now, h.snaps, h.decisions)
	for i := range h.decisions {
		decided(i, &h.decisions[i])
	}
	return candidates
}

// fallback decides, at now, which candidates of the last pass to shrink
// given n nodes: node(i) converts the caller's i-th node and shrunk(i, s)
// receives the i-th of at most max shrinks. It returns how many there are.
func (h *host) fallback(now int64, n int, node func(i int) core.NodeState, max int, shrunk func(i int, s *core.Shrink)) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nodes = h.nodes[:0]
	for i := range n {
		h.nodes = append(h.nodes, node(i))
	}
	shrinks := h.core.Fallback(now, h.nodes, max)
	shrinks = shrinks[:min(len(shrinks), max)] // the caller's array holds max
	for i := range shrinks {
		shrunk(i, &shrinks[i])
	}
	return len(shrinks)
}
