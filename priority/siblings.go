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
// another user's.
type SiblingKey struct {
	User    uint32
	Account string
	GPUs    uint32
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
	samples     []float64
	dist        *Distribution // of samples; nil until one member completed
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

// Done records that job id ended having used gpuSeconds, which its
// remaining siblings' index uses from now on. A job never joined is
// ignored. Non-finite or negative GPU-time is not a sample (NewDistribution
// would drop it too) but still ends the membership.
func (s *Siblings) Done(id uint32, gpuSeconds float64) {
	if s == nil {
		return
	}
	sw, ok := s.member[id]
	if !ok {
		return
	}
	delete(s.member, id)
	sw.active--
	if !(gpuSeconds >= 0) || math.IsInf(gpuSeconds, 1) {
		return
	}
	if len(sw.samples) == MaxSiblingSamples {
		sw.samples = append(sw.samples[:0], sw.samples[1:]...)
	}
	sw.samples = append(sw.samples, gpuSeconds)
	sw.dist, _ = NewDistribution(sw.samples)
}

// Of is the distribution of job id's completed siblings, nil when it has
// none (or is not a member).
func (s *Siblings) Of(id uint32) *Distribution {
	if s == nil {
		return nil
	}
	if sw, ok := s.member[id]; ok {
		return sw.dist
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

// siblingIndex is the 2D-Gittins index of a job with attained service a
// against its completed siblings, and whether they apply: only while a is
// below the longest of them.
func siblingIndex(sib *Distribution, a, delta float64) (float64, bool) {
	if sib == nil || len(sib.sorted) == 0 || !(a < sib.sorted[len(sib.sorted)-1]) {
		return 0, false
	}
	return sib.Index(a, delta), true
}
