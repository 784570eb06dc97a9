package priority

import "math"

// Service across resubmission. Attained service belongs to a job ID, so a
// user whose job sank to a low queue could cancel it after a checkpoint
// (or let it end) and submit the same work again: a new ID, zero service,
// queue 0. Inheritance closes that: a job of the same user, account and
// GPU count is an heir of an ended job, and starts with the queue service
// it had, when it arrived
//
//   - after the end, at most the window (tiresias.sibling_window) after
//     it, however the job ended; or
//   - while the ended job's last run went on (or its last wait, if it
//     ended waiting), if that job did not complete (it was cancelled or
//     failed) and the heir arrived more than the window after it: the
//     replacement queued first and the original cancelled then; or
//   - deferred (below), while the ended job's last run went on, readyGap
//     or more after it began and at most the window before it ended,
//     however it ended.
//
// A job arrives twice (Arrival): when it is submitted and when it can
// first run. For most jobs the two are one moment; a job held from its
// submission (sbatch -H), waiting on a dependency (--dependency) or on a
// begin time (--begin) can first run later, when its owner releases it
// or the job it waits for ends. Either arrival makes it an heir. Such a
// job is a copy queued in advance, not a sweep's member running beside
// the others: a chain of copies, each cancelled as it sinks, used to give
// its owner a fresh queue-0 job every time, each submitted with the
// original and so passing for its sweep's member.
//
// A sweep's members are submitted ready together, within the window of
// one another, so one member's end, completed or cancelled, passes nothing
// to the members submitted with it. Jobs of one key submitted later, after
// a member ended, do inherit: they cannot be told from a resubmission.
// Neither can a deferred job that became ready while a job of its key ran,
// shortly before that job ended: it was kept from running beside it, and
// let go just as it ended (released just before the cancel, or before an
// exit 0 its owner timed). The price is that deferred new work of that
// user and shape let go at most the window before such an end starts in
// its queue too, as work submitted at most the window after it does.
// Jobs that became ready together (one release of many, the end of the
// job they all waited for) are a sweep's members like jobs submitted
// together: a job that became ready less than readyGap after the ended
// job's run began, or before, passes for its sibling.
//
// When several ended jobs qualify the heir takes the largest service,
// once; an ended job's service may pass to every heir (a throw-away job
// submitted first cannot soak it up for the real one).
// tiresias.inherit_service turns it off.

// HeirKey is what an ended job and its heir share.
type HeirKey struct {
	User    uint32
	Account string
	GPUs    uint32
}

// maxBequestsPerKey bounds the ended jobs kept per key inside the window:
// the largest service is what matters, so the smallest go first.
const maxBequestsPerKey = 64

// Inheritance keeps the service of recently ended jobs until the window
// after their end has passed. Not safe for concurrent use; the nil
// *Inheritance is valid and passes nothing on (off).
type Inheritance struct {
	window int64
	byKey  map[HeirKey][]Bequest
}

// readyGap is how long after a job's run began a deferred job must become
// ready to be its heir by that alone, and how much later than its
// submission a job must first be able to run to be deferred. Slurm lets
// jobs go in one scheduling cycle, a release of many in one command: a
// few seconds cover both; a copy let go as its original sinks is minutes
// past that run's start.
const readyGap = 10

// Arrival is when a job arrived in the queue, as inheritance reads it.
type Arrival struct {
	Submit int64 // its first submission
	// Ready is when it could first run (Slurm's EligibleTime, set once its
	// owner's hold, its dependencies and its begin time let it), 0 while
	// it cannot or is not known to.
	Ready int64
}

// deferred says the job could not run when it was submitted: held,
// waiting on a dependency or a begin time.
func (a Arrival) deferred() bool { return a.Ready > a.Submit+readyGap }

// Bequest is an ended job's service and the span in which a job arriving
// is its heir (Inheritance.For).
type Bequest struct {
	JobID     uint32
	Arrived   int64   // its arrival: its first submission, or when it could first run if later
	From      int64   // the start of its last run (or, if it ended waiting, when it last began to wait)
	End       int64   // when it ended
	Completed bool    // it ran to its end (COMPLETED)
	Service   float64 // its queue service at the end
}

// heir says a job that arrived at a is an heir of b (the rules above).
func (h *Inheritance) heir(b *Bequest, a Arrival) bool {
	if h.replaces(b, a.Submit) || (a.Ready != 0 && h.replaces(b, a.Ready)) {
		return true
	}
	return a.deferred() && a.Ready >= b.From+readyGap && a.Ready <= b.End && b.End-a.Ready <= h.window
}

// replaces says a job that arrived at t replaces b: after its end, within
// the window, or during its last run, past the window after b arrived, if
// b did not complete.
func (h *Inheritance) replaces(b *Bequest, t int64) bool {
	// Slurm's times are whole seconds: a job submitted in the second its
	// original ended (`scancel $id; sbatch` in one script) came after it.
	if t >= b.End {
		return t <= b.End+h.window
	}
	return !b.Completed && t >= b.From && t > b.Arrived+h.window
}

// NewInheritance returns a tracker for the window in seconds, nil (off)
// when window is not positive.
func NewInheritance(window float64) *Inheritance {
	if !(window > 0) {
		return nil
	}
	return &Inheritance{window: int64(math.Ceil(window)), byKey: make(map[HeirKey][]Bequest)}
}

// Ended records that a job of key ended; one without service (or with a
// non-finite one) leaves nothing.
func (h *Inheritance) Ended(key HeirKey, b Bequest) {
	if h == nil || !(b.Service > 0) || math.IsInf(b.Service, 1) {
		return
	}
	list := append(h.byKey[key], b)
	if len(list) > maxBequestsPerKey {
		least := 0
		for i := range list {
			if list[i].Service < list[least].Service {
				least = i
			}
		}
		list = append(list[:least], list[least+1:]...)
	}
	h.byKey[key] = list
}

// For is what job id of key, arrived at a, inherits: the largest service
// of the ended jobs it is an heir of (0 and false for none). A job is
// never its own heir.
func (h *Inheritance) For(key HeirKey, id uint32, a Arrival) (Bequest, bool) {
	if h == nil {
		return Bequest{}, false
	}
	var best Bequest
	found := false
	for _, b := range h.byKey[key] {
		if b.JobID == id || !h.heir(&b, a) {
			continue
		}
		if !found || b.Service > best.Service {
			best, found = b, true
		}
	}
	return best, found
}

// Prune forgets the ended jobs whose window has passed at now.
func (h *Inheritance) Prune(now int64) {
	if h == nil {
		return
	}
	for k, list := range h.byKey {
		kept := list[:0]
		for _, b := range list {
			if now-b.End <= h.window {
				kept = append(kept, b)
			}
		}
		if len(kept) == 0 {
			delete(h.byKey, k)
		} else {
			h.byKey[k] = kept
		}
	}
}

// Len is the number of ended jobs kept (tests and metrics).
func (h *Inheritance) Len() int {
	if h == nil {
		return 0
	}
	n := 0
	for _, l := range h.byKey {
		n += len(l)
	}
	return n
}
