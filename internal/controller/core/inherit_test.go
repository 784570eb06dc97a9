package core

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// Issue 20.7: cancel and resubmit does not reset attained service. Job 1
// of user 5 (2 GPUs) runs 500 s, 1000 GPU-s, into queue 2 (thresholds 100,
// 1000), and is cancelled; its replacement, same user, account and width,
// lands in queue 2 at placement and in every pass, not queue 0, and its
// account is not charged the inherited service again.
func TestResubmissionInheritsTheCancelledJobsService(t *testing.T) {
	for _, tc := range []struct {
		name   string
		submit int64 // the replacement's submission
	}{
		{"resubmitted after the cancel", 1510},
		{"submitted during the run, then the original cancelled", 1400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			orig := owned(running(1, 2, 100, 1000), 5, "a")
			pass(c, 1499, orig)
			repl := owned(pending(2, 2, tc.submit), 5, "a")
			orig.State, orig.EndTime, orig.EndState = StateFinished, 1500, EndCancelled
			snaps := []Snapshot{orig}
			if tc.submit < 1500 {
				snaps = []Snapshot{orig, repl} // queued before the cancel
			}
			pass(c, 1500, snaps...)
			usage, _ := c.AccountUsage("a")
			if d := c.Enqueue(1510, &repl); d.Queue != 2 {
				t.Fatalf("replacement enqueued in queue %d, want 2 (the cancelled job's)", d.Queue)
			}
			d := pass(c, 1511, orig, repl)
			if d[1].Queue != 2 || d[1].Service != 1000 {
				t.Fatalf("replacement in queue %d with %v GPU-s, want queue 2 with the 1000 it inherited", d[1].Queue, d[1].Service)
			}
			if after, _ := c.AccountUsage("a"); after > usage+1e-9 {
				t.Fatalf("account charged again: usage %v -> %v", usage, after)
			}
			// Inherited once: later passes and runs add only its own service.
			repl.State, repl.StartTime = StateRunning, 1520
			if d := pass(c, 1530, orig, repl); d[1].Service != 1000+2*10 {
				t.Fatalf("service %v after a 10 s run, want 1020", d[1].Service)
			}
			if r, _ := c.Record(2); r.Inherited != 1000 {
				t.Fatalf("record inherited %v, want 1000", r.Inherited)
			}
		})
	}
}

// What is not a resubmission keeps its own service: another user's job,
// another width, a sweep member submitted with the original, new work past
// the window, and everything with inherit_service off.
func TestOnlyAReplacementInherits(t *testing.T) {
	cases := []struct {
		name string
		job  Snapshot
		off  bool
	}{
		{"another user", owned(pending(2, 2, 1510), 6, "a"), false},
		{"another width", owned(pending(2, 1, 1510), 5, "a"), false},
		{"another account", owned(pending(2, 2, 1510), 5, "b"), false},
		{"submitted with the original, which was then cancelled (a sweep)", owned(pending(2, 2, 110), 5, "a"), false},
		{"submitted past the window", owned(pending(2, 2, 2101), 5, "a"), false},
		{"inherit_service off", owned(pending(2, 2, 1510), 5, "a"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(db)
			cfg.Tiresias.InheritService = !tc.off
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			orig := owned(running(1, 2, 100, 1000), 5, "a")
			snaps := []Snapshot{orig}
			if tc.job.SubmitTime < 1500 {
				snaps = append(snaps, tc.job)
			}
			pass(c, 1499, snaps...)
			orig.State, orig.EndTime, orig.EndState = StateFinished, 1500, EndCancelled
			snaps[0] = orig
			pass(c, 1500, snaps...)
			now := max(tc.job.SubmitTime, 1500) + 1
			if d := pass(c, now, orig, tc.job); d[1].Queue != 0 || d[1].Service != 0 {
				t.Fatalf("job in queue %d with %v GPU-s, want queue 0 with none", d[1].Queue, d[1].Service)
			}
		})
	}
}

// `scontrol requeue` of one's own finished job (within MinJobAge) brings
// the same ID back pending, with Slurm's submit time reset: its record
// continues, with its service, queue and runs, also across a restart.
func TestRequeuedFinishedJobKeepsItsRecord(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	job := owned(running(7, 2, 100, 1000), 5, "a")
	pass(c, 1400, job)
	job.State, job.EndTime, job.EndState = StateFinished, 1500, EndCompleted
	pass(c, 1500, job)
	requeued := owned(pending(7, 2, 1510), 5, "a") // Slurm's submit time is the requeue's
	d := pass(c, 1511, requeued)
	if d[0].Service != 1000 || d[0].Queue != 2 {
		t.Fatalf("requeued finished job: %v GPU-s in queue %d, want 1000 in queue 2", d[0].Service, d[0].Queue)
	}
	r, _ := c.Record(7)
	if r.Runs != 1 || r.FirstSubmit != 100 || r.Finished != 0 {
		t.Fatalf("record after the requeue: %+v", r)
	}

	// The same after a restart between the end and the requeue.
	job = owned(running(8, 2, 2200, 2200), 5, "a") // past job 7's window: inherits nothing
	pass(c, 2600, requeued, job)
	job.State, job.EndTime, job.EndState = StateFinished, 2700, EndCompleted
	pass(c, 2700, requeued, job)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCore(t, db)
	defer c.Close()
	pass(c, 2701, requeued, job) // slurmctld still lists it finished
	back := owned(pending(8, 2, 2710), 5, "a")
	if d := pass(c, 2711, requeued, back); d[1].Service != 1000 {
		t.Fatalf("requeued after a restart: %v GPU-s, want 1000", d[1].Service)
	}
}

// Issue 34.7: copies queued with the original that could not run while it
// ran (chained with --dependency: EligibleTime unset until the original
// ends; held: priority 0 until released) used to start from zero when
// let go, being submitted with it like a sweep's members. Job 1 of user 5
// runs from 1000 to its cancel at 1500 (1000 GPU-s, queue 2); each copy,
// submitted at 105, inherits when it can run: at the cancel, released
// after it, or released just before it.
func TestCopiesLetGoAsTheOriginalEndsInherit(t *testing.T) {
	waits := func(s *Snapshot) { s.BeginTime, s.Deferred = 0, true } // EligibleTime unset
	held := func(s *Snapshot) { s.BeginTime, s.Held = 0, true }
	ready := func(s *Snapshot) { s.BeginTime = 105 } // as Slurm sets it at submit
	letGo := func(s *Snapshot, at int64) { s.Held, s.Deferred, s.BeginTime = false, false, at }
	for _, tc := range []struct {
		name string
		// first is the copy at its submission, before while the
		// original runs; letGo is when Slurm lets it run.
		first, before func(s *Snapshot)
		letGo         int64
	}{
		{"chained with --dependency=afterany", waits, waits, 1500},
		{"held, released after the cancel", held, held, 1505},
		{"held, released just before the cancel", held, held, 1490},
		{"ready at its submission, then held, released after the cancel", ready, held, 1505},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			orig := owned(running(1, 2, 100, 1000), 5, "a")
			orig.BeginTime = 100
			cp := owned(pending(2, 2, 105), 5, "a")
			tc.first(&cp)
			pass(c, 120, orig, cp)
			tc.before(&cp)
			pass(c, 1000, orig, cp)
			if tc.letGo < 1500 {
				letGo(&cp, tc.letGo)
				pass(c, tc.letGo+1, orig, cp)
			}
			orig.State, orig.EndTime, orig.EndState = StateFinished, 1500, EndCancelled
			if tc.letGo >= 1500 {
				pass(c, 1500, orig, cp) // the end, the copy still waiting
				letGo(&cp, tc.letGo)
			}
			d := pass(c, 1506, orig, cp)
			if d[1].Queue != 2 || d[1].Service != 1000 {
				t.Fatalf("copy let go at %d: queue %d with %v GPU-s, want queue 2 with the 1000 it inherited", tc.letGo, d[1].Queue, d[1].Service)
			}
		})
	}
}

// What became ready with the original is a sweep's member, not its copy:
// one submitted (and ready) with it, and one released with it, by the
// same release, as it started. Neither inherits from its cancel.
func TestJobsReadyWithTheOriginalDoNotInherit(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		origReady, mateSubmit int64
	}{
		{"submitted and ready with the original", 100, 110},
		{"held with the original, both released at 1000 by one command", 1000, 105},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			orig := owned(running(1, 2, 100, 1000), 5, "a")
			orig.BeginTime = tc.origReady
			mate := owned(pending(2, 2, tc.mateSubmit), 5, "a")
			mate.BeginTime = max(tc.origReady+2, tc.mateSubmit) // same release, a moment later
			pass(c, 1003, orig, mate)
			orig.State, orig.EndTime, orig.EndState = StateFinished, 1500, EndCancelled
			pass(c, 1500, orig, mate)
			if d := pass(c, 1501, orig, mate); d[1].Queue != 0 || d[1].Service != 0 {
				t.Fatalf("sweep member in queue %d with %v GPU-s, want queue 0 with none", d[1].Queue, d[1].Service)
			}
		})
	}
}

// A held copy whose job slurmctld restarted with (no decision kept) is
// placed, when released, in the queue it is about to inherit.
func TestReleasedCopyIsEnqueuedInTheQueueItInherits(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	orig := owned(running(1, 2, 100, 1000), 5, "a")
	orig.BeginTime = 100
	held := owned(pending(2, 2, 105), 5, "a")
	held.Held = true
	pass(c, 1499, orig, held)
	delete(c.decisions, 2) // as after a restart
	orig.State, orig.EndTime, orig.EndState = StateFinished, 1500, EndCancelled
	pass(c, 1500, orig, held)
	released := held
	released.Held = false // Slurm cleared EligibleTime; it sets it after the call
	if d := c.Enqueue(1510, &released); d.Queue != 2 {
		t.Fatalf("released copy enqueued in queue %d, want 2 (the cancelled original's)", d.Queue)
	}
	// A waiting job of another width is left as it was.
	other := owned(pending(3, 1, 105), 5, "a")
	if d := c.Enqueue(1510, &other); d.Queue != 0 {
		t.Fatalf("a job of another width enqueued in queue %d", d.Queue)
	}
}

// A copy chained behind a running job (deferred: its EligibleTime unset)
// is ranked last in its queue while it waits, below another user's job
// submitted after it, so that when the running job ends between passes
// and Slurm lets the copy go, it does not take the freed GPUs ahead of
// that job with the rank it held while it could not run. A requeued job
// waiting on its new begin time keeps its place: it has run.
func TestDeferredJobRanksLastInItsQueueUntilLetGo(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	orig := owned(running(1, 2, 100, 1000), 5, "a")
	copied := owned(pending(2, 2, 105), 5, "a")
	copied.Deferred = true
	rival := owned(pending(3, 2, 900), 6, "a") // one account: fair share does not decide
	d := pass(c, 1010, orig, copied, rival)
	if d[1].Queue != 0 || d[2].Queue != 0 || d[1].Priority >= d[2].Priority {
		t.Fatalf("waiting copy: queue %d priority %d; another user's later job: queue %d priority %d; want both in queue 0, the copy below",
			d[1].Queue, d[1].Priority, d[2].Queue, d[2].Priority)
	}
	copied.Deferred, copied.BeginTime = false, 1010 // its dependency met
	if d := pass(c, 1011, orig, copied, rival); d[1].Priority <= d[2].Priority {
		t.Fatalf("copy let go, no heir of anything: priority %d, want above the later job's %d", d[1].Priority, d[2].Priority)
	}

	requeued := owned(running(4, 2, 50, 60), 7, "a")
	pass(c, 70, requeued)
	requeued.State, requeued.StartTime, requeued.Deferred, requeued.BeginTime = StatePending, 0, true, 1130
	later := owned(pending(5, 2, 950), 8, "a")
	if d := pass(c, 1012, orig, copied, rival, requeued, later); d[3].Queue != 0 || d[3].Priority <= d[4].Priority {
		t.Fatalf("requeued job waiting on its begin time: queue %d priority %d, want queue 0 above a later job's %d", d[3].Queue, d[3].Priority, d[4].Priority)
	}
}

// A job array's throttle holds its tasks back and lets one go as a sibling
// ends, clearing and setting EligibleTime as a hold would. With %2 or more
// the tasks are a sweep's members, capped in how many run at once: one
// let go at a sibling's cancel starts from its own service, and the
// waiting tasks keep their place in the queue. With %1 they run one after
// another, a chain: the task let go inherits. A task its owner holds on
// its own (scontrol hold 10_3, a record of its own) arrives at its release
// whatever the throttle. Array 10 of user 5 (2 GPUs) was submitted at 100;
// task 11 ran from 1000 and is cancelled at 1500 with 1000 GPU-s.
func TestThrottledArrayTasksAreASweepButAChainOfOneIsNot(t *testing.T) {
	task := func(id uint32) Snapshot {
		s := owned(running(id, 2, 100, 1000), 5, "a")
		s.ArrayJobID, s.BeginTime = 10, 100
		return s
	}
	for _, tc := range []struct {
		name     string
		throttle uint32
		heldTask bool
		want     float64
	}{
		{"%2: the task let go is the sweep's next member", 2, false, 0},
		{"%8: the same", 8, false, 0},
		{"%1: the task let go continues a chain", 1, false, 1000},
		{"%2, a task held on its own, released after the cancel", 2, true, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			first := task(11)
			meta := owned(pending(10, 2, 100), 5, "a") // the tasks still to run
			meta.ArrayJobID, meta.Deferred, meta.ArrayThrottle = 10, true, tc.throttle
			snaps := []Snapshot{first, meta}
			next := task(12)
			if tc.heldTask { // split off when its owner held it
				next.State, next.StartTime, next.BeginTime, next.Held = StatePending, 0, 0, true
				snaps = append(snaps, next)
			}
			later := owned(pending(20, 2, 900), 6, "a") // another user's, submitted later
			snaps = append(snaps, later)
			d := pass(c, 1499, snaps...)
			if d[1].Marker == "" {
				t.Fatal("the array's record got no marker")
			}
			if tc.throttle >= 2 && d[1].Priority <= d[len(d)-1].Priority {
				t.Fatalf("array waiting on its throttle ranks below a job submitted after it: %d vs %d", d[1].Priority, d[len(d)-1].Priority)
			}
			first.State, first.EndTime, first.EndState = StateFinished, 1500, EndCancelled
			snaps[0] = first
			pass(c, 1500, snaps...)
			// Let go at 1500: by the throttle (split, seen running,
			// with the array record's SystemComment marker, as Slurm
			// copies it), or by its owner's release.
			next = task(12)
			next.StartTime, next.BeginTime = 1501, 1500
			if !tc.heldTask {
				next.Marker = d[1].Marker
			}
			d = pass(c, 1502, first, meta, next, later)
			if d[2].Service < tc.want || (tc.want == 0 && d[2].Service > 2*1) {
				t.Fatalf("task let go at 1500 has %v GPU-s, want %v inherited (plus its own second)", d[2].Service, tc.want)
			}
		})
	}
}

// A job's arrival is fixed once it has run: the EligibleTime Slurm gives
// it after a requeue (its begin time, two minutes on) is no arrival, even
// when no pass saw it ready before its first run (it started between
// passes without one, or slurmctld restarted).
func TestARequeuedJobDoesNotArriveAgain(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	job := owned(running(1, 2, 100, 1000), 5, "a") // its EligibleTime not known
	pass(c, 1100, job)
	requeued := owned(pending(1, 2, 1200), 5, "a")
	requeued.BeginTime = 1320
	pass(c, 1330, requeued)
	if r, _ := c.Record(1); r.Ready != 0 {
		t.Fatalf("requeued job ready at %d, want unknown (0)", r.Ready)
	}
	requeued.State, requeued.StartTime = StateRunning, 1340
	pass(c, 1350, requeued)
	if r, _ := c.Record(1); r.Ready != 0 {
		t.Fatalf("requeued job running again ready at %d, want unknown (0)", r.Ready)
	}
}
