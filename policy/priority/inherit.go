package priority

import "math"

// Service across resubmission. Attained service belongs to a job ID, so a
// user whose job sank to a low queue could cancel it after a checkpoint
// (or let it end) and submit the same work again: a new ID, zero service,
// queue 0. Inheritance closes that: a job of the same user, account and
// GPU count is an heir of an ended job, and starts with the queue service
// it had, when it was submitted
//
//   - after the end, at most the window (tiresias.sibling_window) after
//     it, however the job ended; or
//   - while the ended job's last run went on (or its last wait, if it
//     ended waiting), if that job did not complete (it was cancelled or
//     failed) and the heir was submitted more than the window after it: the
//     replacement queued first and the original cancelled then.
//
// A sweep's members are submitted together, within the window of one
// another, so one member's end, completed or cancelled, passes nothing to
// the members submitted with it. Jobs of one key submitted later, after a
// member ended, do inherit: they cannot be told from a resubmission. When
// several ended jobs qualify the heir takes the largest service, once; an
// ended job's service may pass to every heir (a throw-away job submitted
// first cannot soak it up for the real one). tiresias.inherit_service
// turns it off.

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

// Bequest is an ended job's service and the span in which a job submitted
// is its heir (Inheritance.For).
type Bequest struct {
	JobID     uint32
	Submit    int64   // its first submission
	From      int64   // the start of its last run (or, if it ended waiting, when it last began to wait)
	End       int64   // when it ended
	Completed bool    // it ran to its end (COMPLETED)
	Service   float64 // its queue service at the end
}

// heir says a job submitted at submit is an heir of b (the rules above).
func (h *Inheritance) heir(b *Bequest, submit int64) bool {
	if submit > b.End {
		return submit <= b.End+h.window
	}
	return !b.Completed && submit >= b.From && submit > b.Submit+h.window
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

// For is what job id of key, submitted at submit, inherits: the largest
// service of the ended jobs it is an heir of (0 and false for none). A job
// is never its own heir.
func (h *Inheritance) For(key HeirKey, id uint32, submit int64) (Bequest, bool) {
	if h == nil {
		return Bequest{}, false
	}
	var best Bequest
	found := false
	for _, b := range h.byKey[key] {
		if b.JobID == id || !h.heir(&b, submit) {
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
