package core

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// testConfig: queues split at 100 and 1000 GPU-seconds, promotion after
// waiting twice the last run.
func testConfig(db string) config.Config {
	c := config.Default()
	c.DBPath = db
	c.Tiresias.FixThresholds([]float64{100, 1000})
	c.Tiresias.PromoteKnob = 2
	// The accounts the fair-share tests compete with have shares, as if
	// listed in lachesis.yaml's fairshare.shares; any other is unknown.
	c.Tiresias.FairShare.Shares = map[string]float64{"a": 1, "b": 1, "newcomer": 1}
	return c
}

func openCore(t *testing.T, db string) *Core {
	t.Helper()
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(testConfig(db), store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// closedLedger closes c and opens the ledger it wrote at db, for the test
// to read (closed at the test's end).
func closedLedger(t *testing.T, c *Core, db string) *ledger.SQLite {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func pass(c *Core, now int64, snaps ...Snapshot) []Decision {
	out := make([]Decision, len(snaps))
	c.Pass(now, snaps, out)
	return out
}

func running(id, gpus uint32, submit, start int64) Snapshot {
	return Snapshot{ID: id, State: StateRunning, GPUs: gpus, SubmitTime: submit, StartTime: start}
}

func pending(id, gpus uint32, submit int64) Snapshot {
	return Snapshot{ID: id, State: StatePending, GPUs: gpus, SubmitTime: submit}
}

func TestServiceIsGPUsTimesRunSeconds(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	d := pass(c, 1050, running(1, 2, 1000, 1010))
	if d[0].Service != 80 { // 2 GPUs × 40 s
		t.Fatalf("service = %v, want 80", d[0].Service)
	}
}

func TestRequeuedJobKeepsItsServiceAcrossRuns(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1100, running(1, 2, 1000, 1000))      // 200 GPU-s, queue 1
	pass(c, 1105, pending(1, 2, 1105))            // requeued: Slurm reset submit
	d := pass(c, 1200, running(1, 2, 1105, 1150)) // second run: 100 GPU-s more
	if d[0].Service != 300 {
		t.Fatalf("service after requeue = %v, want 300", d[0].Service)
	}
	rec, _ := c.Record(1)
	if rec.Runs != 2 || rec.LastRun != 100 || rec.FirstSubmit != 1000 {
		t.Fatalf("record = %+v, want 2 runs, last run 100 s, first submit 1000", rec)
	}
	if d[0].Queue != 1 {
		t.Fatalf("queue = %d, want 1", d[0].Queue)
	}
}

func TestNewJobOutranksDemotedJob(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	d := pass(c, 2000, running(1, 4, 1000, 1000), pending(2, 1, 1999))
	if d[0].Queue != 2 || d[1].Queue != 0 {
		t.Fatalf("queues = %d,%d; want 2,0", d[0].Queue, d[1].Queue)
	}
	if d[1].Priority <= d[0].Priority {
		t.Fatalf("new job priority %d not above demoted job's %d", d[1].Priority, d[0].Priority)
	}
	if !c.Preemptable(2, 1) {
		t.Fatal("Q0 job may not preempt a Q2 job")
	}
	if c.Preemptable(1, 2) {
		t.Fatal("Q2 job may preempt a Q0 job")
	}
}

func TestPreemptionOnlyAcrossQueues(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1010, running(1, 1, 1000, 1000), pending(2, 1, 1005))
	if c.Preemptable(2, 1) {
		t.Fatal("a job preempted another in the same queue")
	}
	if c.Preemptable(2, 99) {
		t.Fatal("an unknown victim was preemptable")
	}
}

func TestPlacedJobGoesLastInQueueZeroUntilTheNextPass(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	d := pass(c, 1010, pending(1, 1, 1000), running(2, 8, 900, 900))
	s := pending(3, 1, 1020)
	p := c.Enqueue(1020, &s)
	if p.Queue != 0 || p.Priority >= d[0].Priority || p.Priority <= d[1].Priority {
		t.Fatalf("enqueued priority %d (queue %d) not between Q0 job %d and demoted job %d",
			p.Priority, p.Queue, d[0].Priority, d[1].Priority)
	}
	if got, err := c.Decision(3); err != nil || got != p {
		t.Fatalf("Decision(3) = %+v, %v; want the placement", got, err)
	}
}

func TestStarvationPromotionResetsQueueServiceButKeepsTotal(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1200, running(1, 1, 1000, 1000)) // 200 s → queue 1
	pass(c, 1201, pending(1, 1, 1201))       // requeued; waiting since 1200
	if d := pass(c, 1599, pending(1, 1, 1201)); d[0].Queue != 1 {
		t.Fatalf("promoted too early: queue %d", d[0].Queue)
	}
	d := pass(c, 1600, pending(1, 1, 1201)) // waited 400 = 2 × 200
	if d[0].Queue != 0 || d[0].QueueService != 0 || d[0].Service != 200 {
		t.Fatalf("after promotion: %+v; want queue 0, queue service 0, service 200", d[0])
	}
}

func TestLedgerSurvivesRestartWithSameOrder(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	snaps := []Snapshot{running(1, 2, 1000, 1000), pending(2, 1, 1100), running(3, 1, 1050, 1060)}
	before := pass(c, 1300, snaps...)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openCore(t, db)
	defer c2.Close()
	for _, id := range []uint32{1, 2, 3} {
		if _, ok := c2.Record(id); !ok {
			t.Fatalf("job %d lost across restart", id)
		}
	}
	after := pass(c2, 1300, snaps...)
	for i := range before {
		if before[i].Priority != after[i].Priority || before[i].Service != after[i].Service {
			t.Fatalf("job %d: before %+v, after restart %+v", snaps[i].ID, before[i], after[i])
		}
	}
}

func TestFinishedAndPurgedJobsJoinTheHistory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	pass(c, 1100, running(1, 2, 1000, 1000), running(2, 1, 1000, 1000))
	fin := Snapshot{ID: 1, State: StateFinished, GPUs: 2, SubmitTime: 1000, StartTime: 1000, EndTime: 1150}
	if d := pass(c, 1200, fin); d[0].Priority != 0 {
		t.Fatalf("finished job got priority %d", d[0].Priority)
	}
	// Job 2 vanished without a pass seeing it end: counted up to its last sighting.
	if _, ok := c.Record(1); ok {
		t.Fatal("finished job still tracked")
	}
	store := closedLedger(t, c, db)
	samples, total, err := store.CompletedGPUTimes(10)
	if err != nil || total != 2 {
		t.Fatalf("history: %v, %d, %v; want 2 jobs", samples, total, err)
	}
	got := map[float64]bool{samples[0]: true, samples[1]: true}
	if !got[300] || !got[100] { // 2 GPUs × 150 s; 1 GPU × 100 s
		t.Fatalf("history samples = %v, want 300 and 100", samples)
	}
}

func TestHeldJobIsTrackedButNotRanked(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	s := pending(1, 1, 1000)
	s.Held = true
	if d := pass(c, 1010, s); d[0].Priority != 0 {
		t.Fatalf("held job got priority %d", d[0].Priority)
	}
	if _, ok := c.Record(1); !ok {
		t.Fatal("held job not tracked")
	}
}

func TestGPUCountFallsBackToGresStrings(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	s := running(1, UnknownGPUs, 1000, 1000)
	s.GresRequest.PerNode = "gres:gpu:2"
	s.GresRequest.Nodes = 2
	if d := pass(c, 1010, s); d[0].Service != 40 {
		t.Fatalf("service = %v, want 40 (4 GPUs × 10 s)", d[0].Service)
	}
}

func TestSuspendedTimeDoesNotCount(t *testing.T) {
	s := Snapshot{State: StateRunning, StartTime: 100, SuspendTime: 200, PreSusTime: 50}
	if got := s.runSeconds(260); got != 110 {
		t.Fatalf("runSeconds = %v, want 110", got)
	}
	s.State = StateSuspended
	if got := s.runSeconds(260); got != 50 {
		t.Fatalf("suspended runSeconds = %v, want 50", got)
	}
}

func TestReconfigureWithBadFileKeepsConfig(t *testing.T) {
	dir := t.TempDir()
	c := openCore(t, filepath.Join(dir, "l.db"))
	defer c.Close()
	c.configPath = filepath.Join(dir, "lachesis.yaml")
	writeFile(t, c.configPath, "tiresias:\n  thresholds: [5, 1]\n")
	if err := c.Reconfigure(); err == nil {
		t.Fatal("bad config accepted")
	}
	if got := c.Config().Tiresias.Thresholds; len(got) != 2 || got[0] != 100 {
		t.Fatalf("thresholds = %v, want the previous [100 1000]", got)
	}
	writeFile(t, c.configPath, "tiresias:\n  thresholds: [5]\n")
	if err := c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	if got := c.Config().Tiresias.Queues(); got != 2 {
		t.Fatalf("queues = %d after good reload, want 2", got)
	}
}

// Start-time sizing holds an enlarged job back for fallback_after from the
// first pass that finds its GPUs free but not its request, however long it
// queued before: it is lowered only then, so it may still find its best
// case free meanwhile.
func TestFallbackLowersAJobOnlyAfterItWasHeldBackForFallbackAfter(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	c.cfg.Synergy.FallbackAfter = 60 * time.Second
	enlarged := "lachesis: model=x [lachesis:sized cpus=4 mem=1000 share_cpus=1 share_mem=1000]"
	waiting := func(id uint32, submit int64, comment string) Snapshot {
		s := pending(id, 1, submit)
		s.WaitsForResources, s.AdminComment = true, comment
		s.CPUsPerTRES, s.MemPerTRES = "gres/gpu:4", "gres/gpu:1000"
		return s
	}
	out := make([]Decision, 3)
	snaps := []Snapshot{
		waiting(1, 0, enlarged),                                  // queued for a long time
		waiting(2, 1090, enlarged),                               // just submitted
		waiting(3, 1000, "lachesis: model=y proportional share"), // not enlarged
	}
	// Free GPU, 2 free CPUs: not the 4 per GPU asked, more than the share
	// of 1, so both enlarged jobs are held back from the first pass on.
	nodes := []NodeState{{CPUs: 16, AllocCPUs: 14, GPUs: 2, AllocGPUs: 1, MemMB: 8000, Usable: true}}
	for _, now := range []int64{1100, 1159} {
		if got := c.Pass(now, snaps, out); got != 2 {
			t.Fatalf("at %d: candidates = %d, want the 2 enlarged jobs", now, got)
		}
		if sh := c.Fallback(now, nodes, 10); len(sh) != 0 {
			t.Fatalf("at %d, held back for %d s: shrinks = %+v, want none before fallback_after", now, now-1100, sh)
		}
	}
	c.Pass(1160, snaps, out)
	sh := c.Fallback(1160, nodes, 10)
	if len(sh) != 2 || sh[0].CPUsPerGPU != 2 || sh[1].CPUsPerGPU != 2 {
		t.Fatalf("shrinks = %+v, want both jobs lowered to the 2 CPUs per GPU the node spares", sh)
	}
	if !strings.Contains(sh[0].AdminComment, "after 1m0s held back with GPUs free") {
		t.Fatalf("comment %q does not say how long the job was held back", sh[0].AdminComment)
	}
	if got := c.Pass(1161, snaps, out); got != 0 {
		t.Fatalf("a job just asked to shrink is a candidate again (%d)", got)
	}
}

// A job that is not held back (no node has its GPUs free) starts no clock:
// once GPUs are free it still waits fallback_after for its request.
func TestFallbackClockStartsOnlyWhenAJobIsHeldBack(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	c.cfg.Synergy.FallbackAfter = 60 * time.Second
	s := pending(1, 1, 0)
	s.WaitsForResources = true
	s.AdminComment = "lachesis: model=x [lachesis:sized cpus=4 mem=1000 share_cpus=1 share_mem=1000]"
	s.CPUsPerTRES, s.MemPerTRES = "gres:gpu:4", "gres:gpu:1000"
	out := make([]Decision, 1)
	full := []NodeState{{CPUs: 16, AllocCPUs: 14, GPUs: 2, AllocGPUs: 2, MemMB: 8000, Usable: true}}
	free := []NodeState{{CPUs: 16, AllocCPUs: 14, GPUs: 2, AllocGPUs: 1, MemMB: 8000, Usable: true}}
	for now := int64(1000); now <= 1200; now += 30 {
		c.Pass(now, []Snapshot{s}, out)
		if sh := c.Fallback(now, full, 10); len(sh) != 0 {
			t.Fatalf("lowered with no GPU free: %+v", sh)
		}
	}
	c.Pass(1230, []Snapshot{s}, out)
	if sh := c.Fallback(1230, free, 10); len(sh) != 0 {
		t.Fatalf("lowered at the first pass that found its GPU free: %+v", sh)
	}
	c.Pass(1290, []Snapshot{s}, out)
	if sh := c.Fallback(1290, free, 10); len(sh) != 1 || sh[0].CPUsPerGPU != 2 {
		t.Fatalf("after 60 s held back: %+v, want lowered to 2 CPUs per GPU", sh)
	}
}

// A lowering's numbers come from the job's AdminComment, so it is checked
// against the job's request itself, as policy/gres reads it, the one
// reader: it may never raise either dimension, and a request that reader
// refuses is not lowered. Before the port the plugin read the request in
// C (priority_tiresias.c's _per_gpu), which disagreed with policy/gres on
// the rows marked "C read": a unit on a CPU count, a trailing word, extra
// fields, a zero, a kilobyte unit. The lowering asked for here is to 2
// CPUs and 1000 MB per GPU.
func TestFallbackLoweringIsCheckedAgainstTheRequestAsPolicyGresReadsIt(t *testing.T) {
	for _, tc := range []struct {
		name, cpus, mem string
		lowered         bool
	}{
		{"22.05's form, above the lowering", "gres:gpu:4", "gres:gpu:1000", true},
		{"24.11's form, above the lowering", "gres/gpu:4", "gres/gpu:1G", true},
		{"typed request", "gres/gpu:a100:4", "gres/gpu:a100:2000", true},
		{"a lowering that would raise the CPUs", "gres/gpu:1", "gres/gpu:1000", false},
		{"a lowering that would raise the memory", "gres/gpu:4", "gres/gpu:999", false},
		{"no memory per GPU", "gres/gpu:4", "", false},
		{"C read 2048 CPUs from a unit on a CPU count", "gres/gpu:2G", "gres/gpu:1000", false},
		{"C read 4 CPUs past a trailing word", "gres/gpu:4cpus", "gres/gpu:1000", false},
		{"C read the last of too many fields", "gres/gpu:a:b:4", "gres/gpu:1000", false},
		{"C read 4096 MB from a kilobyte unit", "gres/gpu:4", "gres/gpu:4096K", false},
		{"a string longer than the shrink carries", "gres/gpu:4", "gres/gpu:1000," + strings.Repeat("x", ShrinkTRESMax), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			c.cfg.Synergy.FallbackAfter = 0
			s := pending(1, 1, 0)
			s.WaitsForResources = true
			s.AdminComment = "lachesis: model=x [lachesis:sized cpus=4 mem=1000 share_cpus=1 share_mem=1000]"
			s.CPUsPerTRES, s.MemPerTRES = tc.cpus, tc.mem
			// A free GPU and 2 free CPUs: lowered to 2 CPUs per GPU.
			nodes := []NodeState{{CPUs: 16, AllocCPUs: 14, GPUs: 2, AllocGPUs: 1, MemMB: 8000, Usable: true}}
			c.Pass(1000, []Snapshot{s}, make([]Decision, 1))
			sh := c.Fallback(1000, nodes, 10)
			if !tc.lowered {
				if len(sh) != 0 {
					t.Fatalf("shrinks %+v for CpusPerTres=%q MemPerTres=%q, want none", sh, tc.cpus, tc.mem)
				}
				return
			}
			if len(sh) != 1 || sh[0].CPUsPerGPU != 2 || sh[0].MemMBPerGPU > 1000 {
				t.Fatalf("shrinks %+v, want the job lowered to 2 CPUs per GPU", sh)
			}
			if sh[0].CPUsPerTRES != tc.cpus || sh[0].MemPerTRES != tc.mem {
				t.Errorf("shrink carries %q %q, want the strings it was judged on, %q %q", sh[0].CPUsPerTRES, sh[0].MemPerTRES, tc.cpus, tc.mem)
			}
		})
	}
}

// A requeued job that start-time sizing lowered for its first run is
// raised back to its profile's best case when a node holds it now; the
// numbers come from the profile, not from its comment.
func TestPendingLoweredJobIsRaisedToItsProfileBestCase(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	c.bestCase = func(model string, _ uint32) (sensitivity.Demand, bool) {
		if model != "res18" {
			return sensitivity.Demand{}, false
		}
		return sensitivity.Demand{CPUsPerGPU: 4, MemGBPerGPU: 1}, true
	}
	lowered := "lachesis: model=res18 [lachesis:sized cpus=2 mem=1024 share_cpus=1 share_mem=4000]; lachesis: resized to start now"
	s := pending(1, 1, 1000)
	s.BeginTime = 1200 // requeued: held by Slurm, not waiting for resources
	s.AdminComment, s.SizingModel = lowered, "res18"
	other := pending(2, 1, 1000)
	other.AdminComment, other.SizingModel = lowered, "unprofiled"
	out := make([]Decision, 2)
	// Lowered 10 s ago for its first run: that does not delay the raise.
	c.sizing.shrinkTried = map[uint32]int64{1: 1090}
	c.sizing.raiseTried = map[uint32]int64{}
	if got := c.Pass(1100, []Snapshot{s, other}, out); got != 1 {
		t.Fatalf("candidates = %d, want 1 (only the job whose profile asks for more)", got)
	}
	nodes := []NodeState{{CPUs: 8, GPUs: 2, MemMB: 8000, Usable: true}}
	sh := c.Fallback(1100, nodes, 10)
	if len(sh) != 1 || sh[0].JobID != 1 || !sh[0].Raise || sh[0].CPUsPerGPU != 4 || sh[0].MemMBPerGPU != 1024 {
		t.Fatalf("resizes = %+v, want job 1 raised to 4 CPUs, 1024 MB per GPU", sh)
	}
	if !strings.Contains(sh[0].AdminComment, "raised to start now") {
		t.Fatalf("comment %q does not say why", sh[0].AdminComment)
	}
}
