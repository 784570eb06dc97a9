package sim

import (
	"math"
	"testing"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// handTrace builds a small trace from (submit, GPUs, duration) triples, IDs
// from 1 in the given order.
func handTrace(t *testing.T, jobs ...[3]float64) *Trace {
	t.Helper()
	tr := &Trace{Name: "hand-made"}
	for i, j := range jobs {
		tr.Jobs = append(tr.Jobs, Job{ID: uint32(i + 1), Submit: j[0], GPUs: int(j[1]), Duration: j[2]})
	}
	if err := tr.Normalise(); err != nil {
		t.Fatal(err)
	}
	return tr
}

func oneGPU() Shape { return Shape{Nodes: 1, GPUsPerNode: 1, GPUCountOnly: true} }

func jctOf(r *Result, id uint32) float64 {
	for _, j := range r.Jobs {
		if j.ID == id {
			return j.JCT
		}
	}
	return math.NaN()
}

// On one GPU with every job present at time zero, shortest first is
// optimal; durations 5, 1, 3, 2, 4 finish at 1, 3, 6, 10, 15: average 7.
func TestSRTF_AllJobsAtZeroOnOneGPU_ReproducesTheShortestFirstOptimum(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 5}, [3]float64{0, 1, 1}, [3]float64{0, 1, 3}, [3]float64{0, 1, 2}, [3]float64{0, 1, 4})
	for _, shape := range []Shape{oneGPU(), {Nodes: 1, GPUsPerNode: 1, CPUsPerNode: 3, MemGBNode: 62.5}} {
		cfg := DefaultConfig()
		cfg.Shape, cfg.Policy = shape, PolicySRTF
		r := runOK(t, cfg, tr)
		if r.Summary.AvgJCT != 7 {
			t.Fatalf("%v: SRTF average JCT = %v, want 7", shape, r.Summary.AvgJCT)
		}
		if r.Summary.Preemptions != 0 {
			t.Fatalf("SRTF preempted %d times with every job known at 0", r.Summary.Preemptions)
		}
	}
	cfg := DefaultConfig()
	cfg.Shape, cfg.Policy = oneGPU(), PolicyFIFO
	// FIFO runs them in ID order: 5, 6, 9, 11, 15.
	if got := runOK(t, cfg, tr).Summary.AvgJCT; got != 9.2 {
		t.Fatalf("FIFO average JCT = %v, want 9.2", got)
	}
}

// A job that arrives shorter than what runs preempts it under SRTF.
func TestSRTF_ShorterArrivalPreemptsLongerRunningJob(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 100}, [3]float64{10, 1, 5})
	cfg := DefaultConfig()
	cfg.NoCosts() // hand-computed without preemption costs
	cfg.Shape, cfg.Policy = oneGPU(), PolicySRTF
	r := runOK(t, cfg, tr)
	if got := jctOf(r, 2); got != 5 {
		t.Fatalf("short job JCT = %v, want 5", got)
	}
	if got := jctOf(r, 1); got != 105 {
		t.Fatalf("long job JCT = %v, want 105", got)
	}
}

// Strict FIFO holds a small job behind a large one that does not fit;
// fifo-skip lets it through.
func TestFIFO_HeadOfLineBlocksAndSkipDoesNot(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 3, 100}, [3]float64{1, 4, 10}, [3]float64{2, 1, 10})
	cfg := DefaultConfig()
	cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 4, GPUCountOnly: true}
	cases := []struct {
		policy string
		want   float64
	}{
		{PolicyFIFO, 118},    // starts at 110, after the 4-GPU job
		{PolicyFIFOSkip, 10}, // starts at once on the free GPU
	}
	for _, c := range cases {
		cfg.Policy = c.policy
		if got := jctOf(runOK(t, cfg, tr), 3); got != c.want {
			t.Errorf("%s: small job JCT = %v, want %v", c.policy, got, c.want)
		}
	}
}

// Tiresias on one GPU, one threshold at 100 GPU-s: a job arriving while a
// long job is still in queue 0 waits (no preemption inside a queue); when
// the long job is demoted at t=100 the newcomer preempts it.
func TestLAS_PreemptsOnlyAcrossQueues(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 1000}, [3]float64{50, 1, 10})
	cases := []struct {
		name             string
		interval         float64
		penalty          float64
		wantLong, wantSh float64
	}{
		{"demotion acted on at once", 0, 0, 1010, 60},
		{"demotion acted on at the next 30 s tick", 30, 0, 1010, 80},
		{"restart penalty delays the victim", 0, 60, 1070, 60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NoCosts() // hand-computed: only the costs each case names
			cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
			cfg.Shape, cfg.Policy = oneGPU(), PolicyLAS
			cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
			cfg.PolicyOptions.Tiresias.PromoteKnob = 0 // hand-computed without promotion
			cfg.PassInterval, cfg.RestartPenalty = c.interval, c.penalty
			r := runOK(t, cfg, tr)
			if got := jctOf(r, 1); got != c.wantLong {
				t.Errorf("long job JCT = %v, want %v", got, c.wantLong)
			}
			if got := jctOf(r, 2); got != c.wantSh {
				t.Errorf("short job JCT = %v, want %v", got, c.wantSh)
			}
			if r.Summary.Preemptions != 1 {
				t.Errorf("preemptions = %d, want 1", r.Summary.Preemptions)
			}
		})
	}
}

// A job demoted into a queue where another waits is ranked behind it
// (later queue entry) but keeps running under Lachesis's rule, which
// preempts only across queues; the reference simulator's rule preempts it.
//
// One GPU, thresholds 100 and 10⁹ GPU-s. A (1000 s) runs from 0; B (1000
// s) arrives at 1 and waits in queue 0. A is demoted at 100 and B preempts
// it. B is demoted at 200, entering queue 1 after A, which waits there:
//   - Lachesis: B keeps running to 1100, then A runs to 2000.
//   - reference: A preempts B at 200 and runs to 1100, then B to 2000.
func TestLAS_ReferencePreemptionAlsoPreemptsInsideAQueue(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 1000}, [3]float64{1, 1, 1000})
	cases := []struct {
		reference       bool
		wantA, wantB    float64
		wantPreemptions int
	}{
		{false, 2000, 1099, 1},
		{true, 1100, 1999, 2},
	}
	for _, c := range cases {
		cfg := DefaultConfig()
		cfg.NoCosts()
		cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
		cfg.Shape, cfg.Policy, cfg.PassInterval = oneGPU(), PolicyLAS, 0
		cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100, 1e9})
		cfg.PolicyOptions.Tiresias.PromoteKnob = 0 // hand-computed without promotion
		cfg.PolicyOptions.ReferencePreemption = c.reference
		r := runOK(t, cfg, tr)
		if jctOf(r, 1) != c.wantA || jctOf(r, 2) != c.wantB || r.Summary.Preemptions != c.wantPreemptions {
			t.Errorf("reference=%v: JCTs %v, %v and %d preemptions; want %v, %v and %d", c.reference,
				jctOf(r, 1), jctOf(r, 2), r.Summary.Preemptions, c.wantA, c.wantB, c.wantPreemptions)
		}
	}
}

// Starvation promotion with knob 1 on one GPU: two jobs take turns every
// 100 s (see the timeline in the test body).
func TestLAS_PromotionAlternatesTwoLongJobs(t *testing.T) {
	// Job 1 (1000 s) from 0, job 2 (500 s) from 50. Job 1 is demoted at
	// 100 and job 2 takes the GPU; from then on, each time the running job
	// reaches 100 GPU-s in queue 0 it is demoted while the waiting one has
	// waited 1 × its last run (100 s) and is promoted: they swap every
	// 100 s. Job 2 finishes at 1000 (JCT 950); job 1 has 500 s left and
	// runs alone to 1500.
	tr := handTrace(t, [3]float64{0, 1, 1000}, [3]float64{50, 1, 500})
	cfg := DefaultConfig()
	cfg.NoCosts()
	// Promoted jobs may preempt and any run may be: the paper's rule.
	cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1, PromotedPreempts: true}
	cfg.Shape, cfg.Policy, cfg.PassInterval = oneGPU(), PolicyLAS, 0
	cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
	cfg.PolicyOptions.Tiresias.PromoteKnob = 1
	r := runOK(t, cfg, tr)
	if jctOf(r, 1) != 1500 || jctOf(r, 2) != 950 {
		t.Fatalf("JCTs %v and %v, want 1500 and 950", jctOf(r, 1), jctOf(r, 2))
	}
	if r.Summary.Promotions != 9 || r.Summary.Preemptions != 9 {
		t.Fatalf("promotions %d, preemptions %d, want 9 and 9", r.Summary.Promotions, r.Summary.Preemptions)
	}
}

// A job larger than a node takes whole nodes; the remainder goes on one
// more node.
func TestPlacement_LargeJobsTakeWholeNodes(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 4, 100}, [3]float64{1, 16, 100}, [3]float64{2, 12, 10})
	cfg := DefaultConfig()
	cfg.Shape = Shape{Nodes: 3, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	cfg.Policy, cfg.RecordRuns = PolicyFIFOSkip, true
	r := runOK(t, cfg, tr)
	checkInvariants(t, tr, cfg, r)
	nodes := map[uint32][]RunSlot{}
	for _, run := range r.Runs {
		nodes[run.JobID] = run.Slots
	}
	if s := nodes[2]; len(s) != 2 || s[0].GPUs != 8 || s[1].GPUs != 8 {
		t.Fatalf("16-GPU job placed as %+v, want two whole nodes", s)
	}
	// The 12-GPU job needs a whole node and 4 more: it waits for the
	// 16-GPU job (ends at 101) although 4 GPUs are free on node 0.
	if got := jctOf(r, 3); got != 109 {
		t.Fatalf("12-GPU job JCT = %v, want 109", got)
	}
	if s := nodes[3]; len(s) != 2 || s[0].GPUs+s[1].GPUs != 12 {
		t.Fatalf("12-GPU job placed as %+v", s)
	}
}

// On one Synergy server an insensitive job takes 1 CPU, and a sensitive
// job placed after it uses the slack: 5 CPUs (the other 6 free GPUs keep
// their 3 CPUs each), 1.53× faster than at the proportional share. With
// start-time sizing (what slurmctld does) its best case of 9 CPUs is free,
// so it starts with it, 2.4× faster.
func TestSynergy_SensitiveJobUsesWhatAnInsensitiveJobLeaves(t *testing.T) {
	tr := &Trace{Name: "synergy", Jobs: []Job{
		{ID: 1, GPUs: 1, Duration: 100, Model: "gnmt"},
		{ID: 2, GPUs: 1, Duration: 153, Model: "res18"},
	}}
	if err := tr.Normalise(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	cfg.Profiles, cfg.Models, cfg.RecordRuns = profiles(t), ModelsAsGiven, true
	for _, c := range []struct {
		alloc   AllocMode
		cpus    int
		wantJCT float64
	}{
		{AllocProportional, 3, 153},
		{AllocSynergy, 5, 100},
		{AllocStart, 9, 153 / 2.4},
	} {
		cfg.Alloc = c.alloc
		r := runOK(t, cfg, tr)
		checkInvariants(t, tr, cfg, r)
		for _, run := range r.Runs {
			if run.JobID == 2 && run.Slots[0].CPUs != c.cpus {
				t.Errorf("%s: res18 got %d CPUs, want %d", c.alloc, run.Slots[0].CPUs, c.cpus)
			}
		}
		if got := jctOf(r, 2); math.Abs(got-c.wantJCT) > 1e-9 {
			t.Errorf("%s: res18 JCT = %v, want %v", c.alloc, got, c.wantJCT)
		}
	}
}

func TestRun_RejectsJobsLargerThanTheCluster(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 64, 10})
	cfg := DefaultConfig()
	cfg.Shape = Shape{Nodes: 2, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	if _, err := Run(cfg, tr); err == nil {
		t.Fatal("a 64-GPU job on 16 GPUs was accepted")
	}
}

func TestGittins_LearningFromCompletionsStillFinishesEveryJob(t *testing.T) {
	tr := phillySlice(t, 600)
	cfg := DefaultConfig()
	cfg.Shape.Nodes, cfg.Policy = 4, PolicyGittins
	cfg.PolicyOptions.LearnEvery = 50
	cfg.RecordRuns = true
	checkInvariants(t, tr, cfg, runOK(t, cfg, tr))
}

// Slurm holds a requeued job for cred_expire+1 seconds: the victim of a
// preemption may not take a GPU that frees up before the hold ends.
//
// One GPU, threshold 100 GPU-s. A (1000 s) runs from 0; B (150 s) arrives
// at 50 and preempts A when A is demoted at 100. B is demoted at 200 into
// A's queue and keeps running (same queue) to 250. A may start again at
// 100+121 = 221 but the GPU is busy until 250 anyway; with a hold of 200 s
// it waits until 300, leaving the GPU idle for 50 s.
func TestRequeueHold_KeepsTheVictimWaitingEvenWithAFreeGPU(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 1000}, [3]float64{50, 1, 150})
	cases := []struct {
		name  string
		hold  float64
		wantA float64
	}{
		{"hold shorter than the preemptor's run costs nothing", 121, 1150},
		{"hold longer than the preemptor's run idles the GPU", 200, 1200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NoCosts()
			cfg.RequeueHold = c.hold
			cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
			cfg.Shape, cfg.Policy = oneGPU(), PolicyLAS
			cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
			cfg.PolicyOptions.Tiresias.PromoteKnob = 0
			r := runOK(t, cfg, tr)
			if got := jctOf(r, 1); got != c.wantA {
				t.Errorf("victim JCT = %v, want %v", got, c.wantA)
			}
		})
	}
}

// A 2-GPU victim preempted for a 1-GPU job leaves its other GPU idle until
// the next pass, as in Slurm; without the model a waiting 1-GPU job takes
// it in the same pass.
//
// One node of 2 GPUs, threshold 100 GPU-s. A (2 GPUs, 1000 s) runs from 0
// and is demoted at 50 (100 GPU-s). B (1 GPU, 100 s) and C (1 GPU, 10 s)
// arrive at 60; the pass at 60 preempts A for B; C fits in A's other GPU
// at once, or waits for the next pass at 90 when that GPU is frozen.
func TestPartialNodeIdle_LeftoverGPUWaitsForTheNextPass(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 2, 1000}, [3]float64{60, 1, 100}, [3]float64{60, 1, 10})
	cases := []struct {
		name  string
		idle  bool
		wantC float64
	}{
		{"leftover GPU reused at once without the model", false, 10},
		{"leftover GPU idle until the next 30 s pass", true, 40}, // starts at 90
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.NoCosts()
			cfg.PassInterval, cfg.PartialNodeIdle = 30, c.idle
			cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
			cfg.Shape, cfg.Policy = Shape{Nodes: 1, GPUsPerNode: 2, GPUCountOnly: true}, PolicyLAS
			cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
			cfg.PolicyOptions.Tiresias.PromoteKnob = 0
			cfg.RecordRuns = true
			r := runOK(t, cfg, tr)
			checkInvariants(t, tr, cfg, r)
			if got := jctOf(r, 3); got != c.wantC {
				t.Errorf("second small job JCT = %v, want %v", got, c.wantC)
			}
		})
	}
}

// Start-time sizing's patience (synergy.Config.Waits): on a node of 4 GPUs
// and 24 CPUs (share 6 per GPU), alexnet takes its 12 CPUs and mobilenet
// its 6, leaving 2 GPUs and 6 CPUs. res18 (best case 9) fits there only
// lowered to 6 CPUs: it waits for its best case up to fallback_after and
// starts with it if a node frees it meanwhile, else it is lowered then.
func TestStart_HeldJobWaitsForItsBestCaseUpToFallbackAfter(t *testing.T) {
	cases := []struct {
		name          string
		fallbackAfter float64
		mobilenet     float64 // duration at the share; it runs at 1.55
		wantCPUs      int
		wantJCT       float64
	}{
		{"best case freed within the wait", 1800, 155, 9, 99 + 240/2.4},
		{"lowered when the wait ends", 1800, 1e6, 6, 1800 + 240/1.75},
		{"fallback_after 0 lowers at once", 0, 155, 6, 240 / 1.75},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := &Trace{Name: "held", Jobs: []Job{
				{ID: 1, Submit: 0, GPUs: 1, Duration: 1e6, Model: "alexnet"},
				{ID: 2, Submit: 1, GPUs: 1, Duration: c.mobilenet, Model: "mobilenet"},
				{ID: 3, Submit: 2, GPUs: 1, Duration: 240, Model: "res18"},
			}}
			if err := tr.Normalise(); err != nil {
				t.Fatal(err)
			}
			cfg := DefaultConfig()
			cfg.NoCosts()
			cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 4, CPUsPerNode: 24, MemGBNode: 500}
			cfg.Profiles, cfg.Models, cfg.RecordRuns = profiles(t), ModelsAsGiven, true
			cfg.Policy, cfg.Alloc, cfg.FallbackAfter = PolicyFIFO, AllocStart, c.fallbackAfter
			r := runOK(t, cfg, tr)
			checkInvariants(t, tr, cfg, r)
			for _, run := range r.Runs {
				if run.JobID == 3 && run.Slots[0].CPUs != c.wantCPUs {
					t.Errorf("res18 got %d CPUs, want %d", run.Slots[0].CPUs, c.wantCPUs)
				}
			}
			if got := jctOf(r, 3); math.Abs(got-c.wantJCT) > 1e-6 {
				t.Errorf("res18 JCT = %v, want %v", got, c.wantJCT)
			}
		})
	}
}

// Slurm's main scheduler stops at the first job that cannot start (its
// partition has failed for this round); only backfill, every
// BackfillInterval, starts the jobs behind it. One node of 4 GPUs: A (3
// GPUs) runs from 0, B (4 GPUs) waits from 1, C (1 GPU, 10 s) arrives at
// 2.5 with a GPU free: it starts at once when every pass walks the whole
// queue, at the backfill cycle at 4 s with BackfillInterval 2.
func TestBackfillInterval_JobsBehindABlockedOneStartFromBackfill(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 3, 100}, [3]float64{1, 4, 10}, [3]float64{2.5, 1, 10})
	for _, c := range []struct {
		backfill, want float64
	}{{0, 10}, {2, 11.5}} {
		cfg := DefaultConfig()
		cfg.NoCosts()
		cfg.Shape, cfg.Policy = Shape{Nodes: 1, GPUsPerNode: 4, GPUCountOnly: true}, PolicyFIFOSkip
		cfg.BackfillInterval = c.backfill
		if got := jctOf(runOK(t, cfg, tr), 3); got != c.want {
			t.Errorf("backfill interval %v: C's JCT = %v, want %v", c.backfill, got, c.want)
		}
	}
}

// A job that backfill starts by preempting holds the node for the rest
// of the cycle and starts at a later one, once Slurm has requeued its
// victims. One node of 4 GPUs, 2D-LAS with one threshold at 100 GPU-s:
// A, B, C (1 GPU, long) run from 0 and are demoted at 100; D (1 GPU,
// long) runs from 60 and stays in queue 0; E (4 GPUs) waits from 70 and
// cannot start even by preempting A, B and C, so the main scheduler stops
// at it; F and G (1 GPU, 10 s) wait from 80.
//   - Every pass walks the whole queue: F and G preempt at 100 and start
//     there (JCT 30 each).
//   - BackfillInterval 2: the cycle at 100 preempts one job for F and
//     holds the node; F starts at the cycle at 102, where G preempts, and
//     G starts at 104 (JCT 32 and 34).
func TestBackfillInterval_OnePreemptionPerNodeAndCycle(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 1000}, [3]float64{0, 1, 1000}, [3]float64{0, 1, 1000},
		[3]float64{60, 1, 1000}, [3]float64{70, 4, 10}, [3]float64{80, 1, 10}, [3]float64{80, 1, 10})
	for _, c := range []struct {
		backfill, wantF, wantG float64
	}{{0, 30, 30}, {2, 32, 34}} {
		cfg := DefaultConfig()
		cfg.NoCosts()
		cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
		cfg.Shape, cfg.Policy = Shape{Nodes: 1, GPUsPerNode: 4, GPUCountOnly: true}, PolicyLAS
		cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
		cfg.PolicyOptions.Tiresias.PromoteKnob = 0
		cfg.BackfillInterval = c.backfill
		r := runOK(t, cfg, tr)
		if got := jctOf(r, 6); got != c.wantF {
			t.Errorf("backfill interval %v: F's JCT = %v, want %v", c.backfill, got, c.wantF)
		}
		if got := jctOf(r, 7); got != c.wantG {
			t.Errorf("backfill interval %v: G's JCT = %v, want %v", c.backfill, got, c.wantG)
		}
	}
}

// Start-time sizing lowers a job only in the pass, on a node whose GPUs
// are free; Slurm preempts for the request as it stands. One node of 4
// GPUs and 16 CPUs (a share of 4 per GPU), AllocStart, 2D-LAS with a
// threshold at 100 GPU-s, fallback_after 6 s. Language jobs (1 CPU) L1,
// L2 run from 0 and X, Y from 0 to 10; image jobs (best case 9 CPUs per
// GPU) I1 and I2 wait from 1. At 10 I1 starts as sized and I2 is held
// back (a GPU free, 5 CPUs); L3 takes that GPU at 11. At 100 L1 and L2
// are demoted: preempting one leaves a GPU and 5 CPUs, so I2, whose wait
// has long ended, could start there only lowered; it waits for I1's
// demotion at 110 and takes its 9 CPUs.
func TestAllocStart_APreemptorIsNotLowered(t *testing.T) {
	tr := handTrace(t, [3]float64{0, 1, 1000}, [3]float64{0, 1, 1000}, [3]float64{0, 1, 10}, [3]float64{0, 1, 10},
		[3]float64{1, 1, 1000}, [3]float64{1, 1, 1000}, [3]float64{11, 1, 1000})
	for i := range tr.Jobs {
		tr.Jobs[i].Model = "language"
	}
	tr.Jobs[4].Model, tr.Jobs[5].Model = "image", "image"
	cfg := DefaultConfig()
	cfg.NoCosts()
	cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 4, CPUsPerNode: 16, MemGBNode: 64}
	cfg.Policy, cfg.Alloc, cfg.Models, cfg.FallbackAfter = PolicyLAS, AllocStart, ModelsAsGiven, 6
	cfg.Profiles = sensitivity.Profiles{
		"image":    {Model: "image", CPUs: []int{1, 4, 9}, MemGB: []float64{10}, Throughput: [][]float64{{0.3}, {1}, {2}}},
		"language": {Model: "language", CPUs: []int{1}, MemGB: []float64{4}, Throughput: [][]float64{{1}}},
	}
	cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
	cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
	cfg.PolicyOptions.Tiresias.PromoteKnob = 0
	r := runOK(t, cfg, tr)
	for _, j := range r.Jobs {
		if j.ID == 6 && (j.FirstStart != 110 || j.MaxSpeed != 2) {
			t.Errorf("I2 first started at %v at speed %v, want 110 at 2 (as sized, once I1 is demoted)", j.FirstStart, j.MaxSpeed)
		}
	}
}
