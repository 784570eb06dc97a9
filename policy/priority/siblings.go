package priority

import "math"

// Sibling prediction. Deep-learning users submit sweeps: many jobs of one
// model with the same width, seconds apart, whose lengths are close (in the
// Philly trace the log-durations of a job and the same-width job submitted
// just before it, within two minutes, correlate at 0.89). A sweep's first
// completions say where its other members will end, which the cluster-wide
// distribution cannot: a job of a sweep whose completed members all ran
// 70,000 GPU-s, at 60,000 itself, is about to finish, while the global
// history would call it one of the long tail. Ordering by that keeps such a
// job running, or restarts it first, instead of demoting it just before its
// end and leaving it behind fresh arrivals.
//
// No job's own length is used: only the GPU-time of siblings that have
// already completed. The index uses the siblings only while the job's
// service is below the longest of them; beyond it the job has outlived its
// sweep and the global distribution ranks it as before.

// MaxSiblingWindow bounds tiresias.sibling_window: jobs a week apart are
// not one sweep.
const MaxSiblingWindow = 7 * 24 * 3600

// MaxSiblingSamples is how many completed members a sweep keeps (the most
// recent), which bounds its memory whatever the sweep's size.
const MaxSiblingSamples = 64

// SiblingKey is what jobs of one sweep share besides their submit times. The
// user is part of it so that no user's jobs can change the ranking of
// another user's; the partition, so that jobs of one user in partitions of
// different nodes or limits (whose lengths need not be alike) are not one
// sweep, and so that a partition's jobs are ranked by its own members.
type SiblingKey struct {
	User      uint32
	Account   string
	GPUs      uint32
	Partition string
}

// Siblings groups jobs into sweeps and keeps the GPU-time of each sweep's
// completed members. A sweep is a run of jobs of one key whose submit
// times lie at most the window apart: a job joins the sweep of its key
// whose span, widened by the window on both sides, holds its submit time,
// and opens a new one otherwise. Jobs may join in any order (a pass lists
// them in Slurm's order; a restart replays ended members first). Not safe
// for concurrent use; the nil *Siblings is a valid tracker that groups
// nothing (sibling prediction off).
type Siblings struct {
	window int64
	byKey  map[SiblingKey][]*sweep
	member map[uint32]*sweep
}

type sweep struct {
	first, last int64 // earliest and latest member's submit time
	active      int   // members not yet done
	history     SweepHistory
}

// SweepHistory is the GPU-time of a sweep's ended members (at most
// MaxSiblingSamples, the most recent), kept sorted with prefix sums so that
// ranking a member costs two binary searches, as the cluster-wide index
// does. It is updated in place as members end, without allocating once
// full: callers read it during a pass and never keep it.
type SweepHistory struct {
	order  []float64 // oldest first, for eviction
	sorted []float64
	prefix []float64 // prefix[i] = sum of sorted[:i]
}

// Len is the number of ended members it holds.
func (h *SweepHistory) Len() int {
	if h == nil {
		return 0
	}
	return len(h.sorted)
}

// add records one ended member, evicting the oldest when full.
func (h *SweepHistory) add(v float64) {
	if len(h.order) == MaxSiblingSamples {
		old := h.order[0]
		h.order = append(h.order[:0], h.order[1:]...)
		i := upperBound(h.sorted, old) - 1 // old is present: the last equal one
		h.sorted = append(h.sorted[:i], h.sorted[i+1:]...)
	}
	h.order = append(h.order, v)
	i := upperBound(h.sorted, v)
	h.sorted = append(h.sorted, 0)
	copy(h.sorted[i+1:], h.sorted[i:])
	h.sorted[i] = v
	h.prefix = append(h.prefix[:0], 0)
	for _, x := range h.sorted {
		h.prefix = append(h.prefix, h.prefix[len(h.prefix)-1]+x)
	}
}

// index is the 2D-Gittins index against the history, and whether it
// applies: only while the service a is below the longest ended member.
func (h *SweepHistory) index(a, delta float64) (float64, bool) {
	if h.Len() == 0 || !(a < h.sorted[len(h.sorted)-1]) {
		return 0, false
	}
	return gittinsIndex(h.sorted, h.prefix, a, delta), true
}

// NewSiblings returns a tracker for the given window in seconds, or nil
// (off) when window is 0.
func NewSiblings(window float64) *Siblings {
	if !(window > 0) {
		return nil
	}
	return &Siblings{
		window: int64(math.Ceil(window)),
		byKey:  make(map[SiblingKey][]*sweep),
		member: make(map[uint32]*sweep),
	}
}

// Join places job id, submitted at submit, in a sweep. A job already placed
// stays where it is, so callers may join every job on every pass.
func (s *Siblings) Join(id uint32, key SiblingKey, submit int64) {
	if s == nil {
		return
	}
	if _, ok := s.member[id]; ok {
		return
	}
	var sw *sweep
	for _, c := range s.byKey[key] {
		if submit >= c.first-s.window && submit <= c.last+s.window {
			sw = c
			break
		}
	}
	if sw == nil {
		sw = &sweep{first: submit, last: submit}
		s.byKey[key] = append(s.byKey[key], sw)
	}
	sw.first, sw.last = min(sw.first, submit), max(sw.last, submit)
	sw.active++
	s.member[id] = sw
}

// Done records that job id completed having used gpuSeconds, which its
// remaining siblings' index uses from now on. A job never joined is
// ignored. Non-finite or negative GPU-time is not a sample (NewDistribution
// would drop it too) but still ends the membership.
//
// Only a job that ran to its end is a sample: a cancelled, failed or
// timed-out job's GPU-time says when its owner or a fault stopped it, not
// how long its siblings will run, and cancelling is free, so a user could
// otherwise set a sweep's index with jobs cancelled at will. Those end
// with Leave.
func (s *Siblings) Done(id uint32, gpuSeconds float64) {
	sw := s.leave(id)
	if sw == nil || !(gpuSeconds >= 0) || math.IsInf(gpuSeconds, 1) {
		return
	}
	sw.history.add(gpuSeconds)
}

// Leave ends job id's membership without a sample: it ended some other way
// than completing (Done). A job never joined is ignored.
func (s *Siblings) Leave(id uint32) { s.leave(id) }

func (s *Siblings) leave(id uint32) *sweep {
	if s == nil {
		return nil
	}
	sw, ok := s.member[id]
	if !ok {
		return nil
	}
	delete(s.member, id)
	sw.active--
	return sw
}

// Of is the history of job id's sweep, nil when no member has ended (or
// id is not a member). It changes as members end: read it in the pass that
// asked for it.
func (s *Siblings) Of(id uint32) *SweepHistory {
	if s == nil {
		return nil
	}
	if sw, ok := s.member[id]; ok && sw.history.Len() > 0 {
		return &sw.history
	}
	return nil
}

// Prune forgets sweeps no job can still join or use: no active member,
// and the window past their latest member at now. It keeps the tracker's
// size bounded by the jobs of the last window plus the active ones.
func (s *Siblings) Prune(now int64) {
	if s == nil {
		return
	}
	for k, sweeps := range s.byKey {
		kept := sweeps[:0]
		for _, sw := range sweeps {
			if sw.active > 0 || now-sw.last <= s.window {
				kept = append(kept, sw)
			}
		}
		clear(sweeps[len(kept):])
		if len(kept) == 0 {
			delete(s.byKey, k)
		} else {
			s.byKey[k] = kept
		}
	}
}

// Len is the number of jobs placed and not yet done (for tests and
// metrics).
func (s *Siblings) Len() int {
	if s == nil {
		return 0
	}
	return len(s.member)
}
