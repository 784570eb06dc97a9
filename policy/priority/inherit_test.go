package priority

import (
	"math"
	"testing"
)

// alice's job 1 arrived at 100, ran from 1000 and was cancelled at 2000
// with 2000 GPU-s; job1Completed is the same job having exited 0;
// job1ArrivedAtItsStart arrived (was submitted, or released) at 1000 and
// started at once.
var (
	alice                 = HeirKey{User: 1000, Account: "vision", GPUs: 2}
	job1                  = Bequest{JobID: 1, Arrived: 100, From: 1000, End: 2000, Service: 2000}
	job1Completed         = Bequest{JobID: 1, Arrived: 100, From: 1000, End: 2000, Completed: true, Service: 2000}
	job1ArrivedAtItsStart = Bequest{JobID: 1, Arrived: 1000, From: 1000, End: 2000, Service: 2000}
)

func TestInheritance(t *testing.T) {
	ended, completed, sweepMate := job1, job1Completed, job1ArrivedAtItsStart
	cases := []struct {
		name   string
		ended  Bequest
		key    HeirKey
		id     uint32
		submit int64
		want   float64
	}{
		{"resubmitted after the cancel, inside the window", ended, alice, 2, 2300, 2000},
		{"resubmitted in the second of the cancel (scancel; sbatch)", ended, alice, 2, 2000, 2000},
		{"resubmitted in the second of an exit 0", completed, alice, 2, 2000, 2000},
		{"resubmitted at the window's end", ended, alice, 2, 2600, 2000},
		{"resubmitted after a completion (exit 0 at a checkpoint)", completed, alice, 2, 2300, 2000},
		{"submitted while the run went on, then the original cancelled", ended, alice, 2, 1500, 2000},
		{"submitted while the run went on, then the original completed", completed, alice, 2, 1500, 0},
		{"submitted with the original (a sweep's member), then it was cancelled", sweepMate, alice, 2, 1500, 0},
		{"submitted past the window: new work", ended, alice, 2, 2601, 0},
		{"submitted before the run began", ended, alice, 2, 999, 0},
		{"another user", ended, HeirKey{User: 1001, Account: "vision", GPUs: 2}, 2, 2300, 0},
		{"another account", ended, HeirKey{User: 1000, Account: "nlp", GPUs: 2}, 2, 2300, 0},
		{"another width", ended, HeirKey{User: 1000, Account: "vision", GPUs: 4}, 2, 2300, 0},
		{"the ended job itself (requeued after its end)", ended, alice, 1, 2300, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inheritsOne(t, alice, c.ended, c.key, c.id, Arrival{Submit: c.submit, Ready: c.submit}, c.want)
		})
	}
}

// inheritsOne checks that a job of key, id and arrival a inherits want
// (0: nothing) from the one job of owner that ended, b, in a 600 s window.
func inheritsOne(t *testing.T, owner HeirKey, b Bequest, key HeirKey, id uint32, a Arrival, want float64) {
	t.Helper()
	h := NewInheritance(600)
	h.Ended(owner, b)
	got, ok := h.For(key, id, a)
	if ok != (want > 0) || got.Service != want {
		t.Fatalf("For = %+v, %v; want service %v", got, ok, want)
	}
}

// Issue 34.7: copies queued with the original (inside the window of its
// submission at 100) that could not run while it ran: chained with
// --dependency, held and released, or waiting on --begin. Each is an heir
// of the copy it follows, however that copy ended, when it was let go
// after the end (within the window) or shortly before it; what became
// ready with the original's run, or before it, is a sweep's member.
func TestDeferredCopiesInherit(t *testing.T) {
	// releasedTogether: both released at 1000 by one command.
	cancelled, completed, releasedTogether := job1, job1Completed, job1ArrivedAtItsStart
	cases := []struct {
		name  string
		ended Bequest
		ready int64 // the copy was submitted at 105
		want  float64
	}{
		{"chained: ready when the original was cancelled", cancelled, 2001, 2000},
		{"chained: ready when the original completed", completed, 2001, 2000},
		{"released after the cancel", cancelled, 2100, 2000},
		{"released at the window's end", cancelled, 2600, 2000},
		{"released just before the cancel", cancelled, 1990, 2000},
		{"released just before an exit 0", completed, 1990, 2000},
		{"released the window before the cancel", cancelled, 1400, 2000},
		{"released during the run past the window after the original, then it was cancelled", cancelled, 1300, 2000},
		{"released during the run past the window after the original, then it completed", completed, 1300, 0},
		{"released past the window after the end: new work", cancelled, 2601, 0},
		{"released with the original, which started at once (one release of many)", releasedTogether, 1005, 0},
		{"released before the original's run began", cancelled, 900, 0},
		{"still held", cancelled, 0, 0},
		// Ready at its submission, or within readyGap of it: judged as
		// before, so one submitted with the original is a sweep's member.
		{"ready at its submission, with the original", cancelled, 105, 0},
		{"ready within readyGap of its submission", cancelled, 105 + readyGap, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inheritsOne(t, alice, c.ended, alice, 2, Arrival{Submit: 105, Ready: c.ready}, c.want)
		})
	}
}

// A throw-away job submitted first cannot soak up the service: every heir
// gets the largest service it qualifies for.
func TestInheritanceGivesEveryHeirTheLargest(t *testing.T) {
	h := NewInheritance(600)
	k := HeirKey{User: 1, GPUs: 1}
	h.Ended(k, Bequest{JobID: 1, From: 0, End: 100, Service: 50})
	h.Ended(k, Bequest{JobID: 2, From: 0, End: 110, Service: 900})
	h.Ended(k, Bequest{JobID: 3, From: 0, End: 120, Service: 0}) // nothing to pass on
	for _, id := range []uint32{10, 11} {
		if b, ok := h.For(k, id, Arrival{Submit: 130}); !ok || b.Service != 900 || b.JobID != 2 {
			t.Fatalf("job %d inherits %+v, want job 2's 900", id, b)
		}
	}
	if h.Len() != 2 {
		t.Fatalf("%d ended jobs kept, want 2 (one had no service)", h.Len())
	}
	h.Prune(100 + 600)
	if h.Len() != 2 {
		t.Fatalf("pruned inside the window")
	}
	h.Prune(110 + 601)
	if h.Len() != 0 {
		t.Fatalf("%d kept past every window", h.Len())
	}
}

func TestInheritanceIsBounded(t *testing.T) {
	h := NewInheritance(600)
	k := HeirKey{User: 1}
	for i := 0; i < 10*maxBequestsPerKey; i++ {
		h.Ended(k, Bequest{JobID: uint32(i), End: 100, Service: float64(i + 1)})
	}
	if h.Len() != maxBequestsPerKey {
		t.Fatalf("%d kept, want %d", h.Len(), maxBequestsPerKey)
	}
	if b, _ := h.For(k, 99999, Arrival{Submit: 101}); b.Service != float64(10*maxBequestsPerKey) {
		t.Fatalf("the largest was dropped: %+v", b)
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), -5} {
		h.Ended(HeirKey{User: 2}, Bequest{Service: bad})
	}
	if _, ok := h.For(HeirKey{User: 2}, 1, Arrival{}); ok {
		t.Fatal("a non-finite or negative service was passed on")
	}
}

func TestInheritanceOffIsNil(t *testing.T) {
	h := NewInheritance(0)
	if h != nil {
		t.Fatal("window 0 gave a tracker")
	}
	h.Ended(HeirKey{}, Bequest{Service: 5, End: 1})
	h.Prune(5)
	if _, ok := h.For(HeirKey{}, 2, Arrival{Submit: 1}); ok || h.Len() != 0 {
		t.Fatal("the nil tracker passed service on")
	}
}
