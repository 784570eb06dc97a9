package core

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// ruleCore is a core on the test config changed by edit, logging into the
// returned buffer, whose clock (Preemptable's) reads *now.
func ruleCore(t testing.TB, now *int64, edit func(*config.Config)) (*Core, *bytes.Buffer) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "l.db")
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(db)
	if edit != nil {
		edit(&cfg)
	}
	var logged bytes.Buffer
	c, err := New(cfg, store, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.clock = func() int64 { return *now }
	t.Cleanup(func() { c.Close() })
	return c, &logged
}

// requeueable is s as a job Slurm may requeue (every snapshot of a real
// pass says either way; the helpers' zero value is --no-requeue).
func requeueable(s Snapshot) Snapshot { s.RequeueAllowed = true; return s }

func inPartition(s Snapshot, tier uint32) Snapshot { s.PartitionTier = tier; return s }

func inArray(s Snapshot, array uint32) Snapshot { s.ArrayJobID = array; return s }

// Issue 26 items 5 and 6: a job never preempts a job of a partition with a
// higher PriorityTier, and tasks of one array never preempt each other;
// anything else the queues decide as before.
func TestPreemptable_PartitionTiersAndArrays(t *testing.T) {
	now := int64(1100)
	c, _ := ruleCore(t, &now, func(cfg *config.Config) { cfg.Tiresias.Preemption.MinRun = 0 })
	pass(c, 1100,
		requeueable(inPartition(running(1, 8, 900, 1000), 10)),             // urgent (tier 10), demoted
		requeueable(inArray(inPartition(running(4, 8, 900, 1000), 1), 50)), // task of array 50, demoted
		requeueable(inPartition(pending(2, 1, 1050), 1)),                   // gpu (tier 1)
		requeueable(inPartition(pending(3, 1, 1050), 10)),                  // urgent
		requeueable(inArray(inPartition(pending(5, 1, 1050), 1), 50)),      // array 50's next task
	)
	cases := []struct {
		name                 string
		preemptor, preemptee uint32
		want                 bool
	}{
		{"tier 1 does not preempt tier 10", 2, 1, false},
		{"tier 10 preempts tier 10", 3, 1, true},
		{"tier 10 preempts tier 1", 3, 4, true},
		{"a plain tier-1 job preempts an array task of tier 1", 2, 4, true},
		{"an array's task does not preempt its own running task", 5, 4, false},
		{"an array's task does not preempt tier 10 either", 5, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Preemptable(tc.preemptor, tc.preemptee); got != tc.want {
				t.Fatalf("Preemptable(%d, %d) = %v, want %v", tc.preemptor, tc.preemptee, got, tc.want)
			}
		})
	}
}

// Issue 26 item 4: in a queue, jobs Slurm may requeue are taken before a
// --no-requeue job, which a preemption kills.
func TestVictimOrder_RequeueableJobsBeforeNoRequeue(t *testing.T) {
	now := int64(1100)
	c, _ := ruleCore(t, &now, nil)
	// Both in queue 1; by rank alone job 2 (more service) goes first, but
	// it may not be requeued.
	pass(c, 1100, requeueable(running(1, 4, 900, 1060)), running(2, 4, 900, 1000), pending(3, 1, 1090))
	if c.decisions[1].Queue != 1 || c.decisions[2].Queue != 1 {
		t.Fatalf("jobs 1 and 2 in queues %d and %d, want 1", c.decisions[1].Queue, c.decisions[2].Queue)
	}
	if a, b := c.VictimOrder(1), c.VictimOrder(2); a >= b {
		t.Fatalf("victim order: requeueable job 1 is %d, --no-requeue job 2 is %d; want job 1 first", a, b)
	}
	// Both requeueable, the rank decides: the test's premise.
	pass(c, 1101, requeueable(running(1, 4, 900, 1060)), requeueable(running(2, 4, 900, 1000)), pending(3, 1, 1090))
	if a, b := c.VictimOrder(1), c.VictimOrder(2); a <= b {
		t.Fatalf("both requeueable: job 1 is %d, job 2 is %d; want job 2 first by rank", a, b)
	}
}

// Issue 26 item 10: a preempted run ends when Slurm preempted it, not at
// the last pass that saw it running; a requeue that is not a preemption
// ends at the end time Slurm's requeue set while the pass can see it.
func TestRequeuedRunEndsAtSlurmsEndOfTheRun(t *testing.T) {
	now := int64(1100)
	c, _ := ruleCore(t, &now, nil)
	pass(c, 1100, requeueable(running(1, 2, 900, 1000)), requeueable(running(2, 2, 900, 1000)), requeueable(running(3, 2, 900, 1000)))
	c.Preempting(1, 1107)            // Slurm preempts job 1 at 1107
	completing := pending(2, 2, 900) // job 2's owner requeued it at 1104; still completing
	completing.EndTime = 1104
	pass(c, 1110, pending(1, 2, 1108), completing, pending(3, 2, 1109))
	for _, tc := range []struct {
		id          uint32
		service     float64
		preemptions int
	}{
		{1, 2 * 107, 1}, // to the preemption
		{2, 2 * 104, 0}, // to the requeue's end time
		{3, 2 * 100, 0}, // Slurm says nothing: to the last pass
	} {
		rec, _ := c.Record(tc.id)
		if rec.Total() != tc.service || rec.Preemptions != tc.preemptions || rec.RunOpen {
			t.Errorf("job %d: service %v, %d preemptions, run open %v; want %v, %d, closed",
				tc.id, rec.Total(), rec.Preemptions, rec.RunOpen, tc.service, tc.preemptions)
		}
	}
}

// Issue 20 item 7: max_per_job counts Lachesis's preemptions alone, so a
// job's owner cannot make it unpreemptable by requeuing it themselves.
func TestMaxPerJobCountsOnlyPreemptions(t *testing.T) {
	now := int64(1100)
	c, _ := ruleCore(t, &now, func(cfg *config.Config) {
		cfg.Tiresias.Preemption.MinRun = 0
		cfg.Tiresias.Preemption.MaxPerJob = 1
	})
	// The owner requeues job 1 twice; it runs again, demoted.
	pass(c, 1100, requeueable(running(1, 8, 900, 1000)))
	pass(c, 1110, requeueable(pending(1, 8, 900)))
	pass(c, 1200, requeueable(running(1, 8, 900, 1150)))
	pass(c, 1210, requeueable(pending(1, 8, 900)))
	now = 1300
	pass(c, 1300, requeueable(running(1, 8, 900, 1250)), requeueable(pending(2, 1, 1290)))
	if !c.Preemptable(2, 1) {
		t.Fatal("a job its owner requeued twice is unpreemptable under max_per_job 1")
	}
	// One real preemption spends the budget.
	c.Preempting(1, 1300)
	pass(c, 1310, requeueable(pending(1, 8, 900)), requeueable(running(2, 1, 1290, 1305)))
	now = 1400
	pass(c, 1400, requeueable(running(1, 8, 900, 1350)), requeueable(running(2, 1, 1290, 1305)), requeueable(pending(3, 1, 1390)))
	if c.Preemptable(3, 1) {
		t.Fatal("a job preempted once is still preemptable under max_per_job 1")
	}
}

// Issue 26 item 7: a preemption min_run refuses is shown as the waiting
// job's reason and logged, once per rule per blockedLogEvery; a job that
// may preempt again loses the reason.
func TestBlockedPreemptionIsShownAndLogged(t *testing.T) {
	now := int64(1100)
	c, logged := ruleCore(t, &now, func(cfg *config.Config) { cfg.Tiresias.Preemption.MinRun = 600 })
	snaps := []Snapshot{requeueable(running(1, 8, 900, 1000)), requeueable(pending(2, 1, 1050)), requeueable(pending(4, 1, 1050))}
	pass(c, 1100, snaps...)
	if c.Preemptable(2, 1) {
		t.Fatal("a 100 s run was preemptable under min_run 600")
	}
	out := pass(c, 1101, snaps...)
	want := "Lachesis: may preempt job 1 when its run reaches min_run (100 of 600 s)"
	if out[1].Blocked != want {
		t.Fatalf("job 2's reason %q, want %q", out[1].Blocked, want)
	}
	if out[2].Blocked != "" || out[0].Blocked != "" {
		t.Fatalf("jobs Slurm did not try got reasons %q, %q", out[0].Blocked, out[2].Blocked)
	}
	line := `msg="preemption blocked" rule=min_run preemptor_job_id=2 job_id=1 ran_s=100`
	if strings.Count(logged.String(), line) != 1 {
		t.Fatalf("log lacks %q once:\n%s", line, logged.String())
	}
	now = 1110
	c.Preemptable(2, 1)
	pass(c, 1111, snaps...)
	if n := strings.Count(logged.String(), "preemption blocked"); n != 1 {
		t.Fatalf("%d 'preemption blocked' lines within a minute, want 1", n)
	}
	now = 1600
	if !c.Preemptable(2, 1) {
		t.Fatal("a 600 s run was not preemptable under min_run 600")
	}
	if out := pass(c, 1601, snaps...); out[1].Blocked != "" {
		t.Fatalf("job 2 may preempt, yet its reason is %q", out[1].Blocked)
	}
}

// Issue 26 item 4: a --no-requeue victim that Slurm kills is logged like a
// requeue ("job preempted ... reason="), with outcome=killed, and keeps its
// reason in the ledger.
func TestKilledVictimIsLoggedWithItsReason(t *testing.T) {
	now := int64(1100)
	c, logged := ruleCore(t, &now, func(cfg *config.Config) { cfg.Tiresias.Preemption.MinRun = 0 })
	pass(c, 1100, running(1, 8, 900, 1000), requeueable(pending(2, 1, 1050)))
	if !c.Preemptable(2, 1) {
		t.Fatal("demoted job not preemptable")
	}
	c.Preempting(1, 1102)
	killed := running(1, 8, 900, 1000)
	killed.State, killed.EndTime, killed.EndState = StateFinished, 1102, EndFailed
	pass(c, 1105, killed, requeueable(running(2, 1, 1050, 1103)))
	want := `msg="job preempted" job_id=1 preemptor_job_id=2 preemptor_queue=0 queue=1 ran_s=102 preemptions=1 outcome=killed reason="preempted by job 2 (queue 0) from queue 1 after a 102 s run"`
	if !strings.Contains(logged.String(), want) {
		t.Fatalf("log lacks\n%s\nin:\n%s", want, logged.String())
	}
}
