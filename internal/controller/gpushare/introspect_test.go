package gpushare

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/node-agent/jobprogress"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// ratesOf builds a job's introRates from samples (sharers, iterations/s
// (<0: no progress), utilisation) on one GPU, one report every
// IntroSettle: each window's reports after its first count (the first
// spans the change).
func ratesOf(gpu string, samples ...[3]float64) *introRates {
	r := &introRates{}
	for i, s := range samples {
		e := wire.JobUsage{GPUs: []wire.JobGPUUsage{{UUID: gpu, Sharers: int(s[0]), UtilPct: s[2]}}}
		if s[1] >= 0 {
			e.Progress = &wire.JobProgress{ItersPerSec: s[1]}
		}
		r.observe(&e, "n1", int64(1000)+introSettleSec*int64(i))
	}
	return r
}

// alone then shared: three samples alone at rate a, three beside a guest
// at rate b (the first of each window is skipped).
func aloneThenShared(gpu string, a, b float64, progress bool) *introRates {
	return aloneThenSharedBy(gpu, 2, a, b, progress)
}

// aloneThenSharedBy is aloneThenShared with sharers jobs on the GPU.
func aloneThenSharedBy(gpu string, sharers int, a, b float64, progress bool) *introRates {
	it := func(v float64) float64 {
		if progress {
			return v
		}
		return -1
	}
	n := float64(sharers)
	return ratesOf(gpu, [3]float64{1, it(a), a}, [3]float64{1, it(a), a}, [3]float64{1, it(a), a},
		[3]float64{n, it(b), b}, [3]float64{n, it(b), b}, [3]float64{n, it(b), b})
}

func sharedOnly(gpu string, since int) *introRates {
	r := ratesOf(gpu, [3]float64{2, -1, 50}, [3]float64{2, -1, 50}, [3]float64{2, -1, 50})
	r.since += int64(since)
	return r
}

// shiftedBy moves r's window start by d seconds (a job that came later).
func shiftedBy(r *introRates, d int64) *introRates {
	r.since += d
	return r
}

func TestJudgePairs(t *testing.T) {
	cfg := sharing.Config{MaxSlowdown: 0.05}
	host := func(r *introRates) pairMember { return pairMember{id: 1, model: "resnet", rates: r} }
	guest := func(id uint32, r *introRates) pairMember {
		return pairMember{id: id, opportunistic: true, model: "lstm", rates: r}
	}
	cases := []struct {
		name       string
		members    []pairMember
		wantPairs  int
		wantRevert bool
		wantGuest  uint32
		wantSignal string
	}{
		{"host 20% slower beside its guest: the guest is requeued",
			[]pairMember{host(aloneThenShared("g0", 10, 8, true)), guest(2, sharedOnly("g0", 0))}, 1, true, 2, signalIters},
		{"host 4% slower: the guest is kept",
			[]pairMember{host(aloneThenShared("g0", 10, 9.6, true)), guest(2, sharedOnly("g0", 0))}, 1, false, 2, signalIters},
		{"host exactly at max_slowdown: the guest is kept",
			[]pairMember{host(aloneThenShared("g0", 100, 95, true)), guest(2, sharedOnly("g0", 0))}, 1, false, 2, signalIters},
		{"host without progress 30% less busy: judged on utilisation, the guest is requeued",
			[]pairMember{host(aloneThenShared("g0", 90, 63, false)), guest(2, sharedOnly("g0", 0))}, 1, true, 2, signalUtil},
		{"host too briefly shared: nothing is decided",
			[]pairMember{host(ratesOf("g0", [3]float64{1, 10, 90}, [3]float64{1, 10, 90}, [3]float64{1, 10, 90},
				[3]float64{2, 1, 9}, [3]float64{2, 1, 9})), guest(2, sharedOnly("g0", 0))}, 0, false, 0, ""},
		{"host never alone: nothing is decided (no solo rate)",
			[]pairMember{host(sharedOnly("g0", 0)), guest(2, sharedOnly("g0", 0))}, 0, false, 0, ""},
		{"guest on another GPU: no pair",
			[]pairMember{host(aloneThenShared("g0", 10, 5, true)), guest(2, sharedOnly("g1", 0))}, 0, false, 0, ""},
		{"two guaranteed jobs beside the guest: not judged (whose loss is whose)",
			[]pairMember{host(aloneThenShared("g0", 10, 5, true)), {id: 3, model: "x", rates: aloneThenShared("g0", 10, 5, true)},
				guest(2, sharedOnly("g0", 0))}, 0, false, 0, ""},
		{"two guaranteed jobs and no guest: nobody is requeued",
			[]pairMember{host(aloneThenShared("g0", 10, 5, true)), {id: 3, model: "x", rates: aloneThenShared("g0", 10, 5, true)}}, 0, false, 0, ""},
		{"host 3% slower, the guest measured at 2% of its own rate: futile, the guest is requeued",
			[]pairMember{host(aloneThenShared("g0", 10, 9.7, true)), guest(2, aloneThenShared("g0", 10, 0.2, true))}, 1, true, 2, signalIters},
		{"host 3% slower, the guest measured at half its own rate: the pair gains, the guest is kept",
			[]pairMember{host(aloneThenShared("g0", 10, 9.7, true)), guest(2, aloneThenShared("g0", 10, 5, true))}, 1, false, 2, signalIters},
		// Issue 34 item 4: the earlier guest saturates the GPU once a
		// newcomer arrives; the tie (one window, the later job) used to
		// requeue the newcomer.
		{"two guests: the earlier one whose utilisation rose is requeued, not the newcomer beside it",
			[]pairMember{host(aloneThenSharedBy("g0", 3, 10, 5, true)),
				guest(2, ratesOf("g0", [3]float64{2, -1, 20}, [3]float64{2, -1, 20}, [3]float64{2, -1, 20},
					[3]float64{3, -1, 20}, [3]float64{3, -1, 90}, [3]float64{3, -1, 90})),
				guest(4, shiftedBy(ratesOf("g0", [3]float64{3, -1, 30}, [3]float64{3, -1, 30}, [3]float64{3, -1, 30}), 30))},
			1, true, 2, signalIters},
		{"two guests: the newcomer whose use slowed the host is requeued, the steady earlier one kept",
			[]pairMember{host(aloneThenSharedBy("g0", 3, 10, 5, true)),
				guest(2, ratesOf("g0", [3]float64{2, -1, 20}, [3]float64{2, -1, 20}, [3]float64{2, -1, 20},
					[3]float64{3, -1, 20}, [3]float64{3, -1, 20}, [3]float64{3, -1, 20})),
				guest(4, shiftedBy(ratesOf("g0", [3]float64{3, -1, 30}, [3]float64{3, -1, 30}, [3]float64{3, -1, 30}), 30))},
			1, true, 4, signalIters},
		{"two guests: the one that came last is requeued",
			[]pairMember{host(aloneThenSharedBy("g0", 4, 10, 5, true)), guest(2, sharedOnly("g0", 0)), guest(4, sharedOnly("g0", 5)), guest(3, sharedOnly("g0", 0))},
			1, true, 4, signalIters},
		// The pass runs after the requeue of a guest the host's last
		// report still counted: the guests left are not charged for it.
		{"a guest left since the host's last report: the ones still there are not judged on its window",
			[]pairMember{host(aloneThenSharedBy("g0", 3, 10, 5, true)), guest(2, sharedOnly("g0", 0))}, 0, false, 0, ""},
		{"a guest came since the host's last report: not judged on the window before it",
			[]pairMember{host(aloneThenShared("g0", 10, 9.9, true)), guest(2, sharedOnly("g0", 0)), guest(3, sharedOnly("g0", 5))}, 0, false, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := judgePairs(cfg, tc.members)
			if len(got) != tc.wantPairs {
				t.Fatalf("%d verdicts, want %d: %+v", len(got), tc.wantPairs, got)
			}
			if tc.wantPairs == 0 {
				return
			}
			v := got[0]
			if v.Revert != tc.wantRevert || v.guest.id != tc.wantGuest || v.host.id != 1 || v.signal != tc.wantSignal {
				t.Fatalf("verdict %+v (solo %v shared %v), want revert %v guest %d signal %s", v, v.rates.HostSolo, v.rates.HostShared, tc.wantRevert, tc.wantGuest, tc.wantSignal)
			}
		})
	}
}

// A guest on shares of two GPUs (Slurm 23.11+'s MULTIPLE_SHARING_GRES_PJ)
// is judged beside the host of each: kept beside the one it barely slows
// (g0), requeued for the one it slows by 30% (g1). Judged on its first GPU
// only, as before, the bad pair on g1 was never seen.
func TestJudgePairsJudgesAGuestOfSeveralGPUsOnEach(t *testing.T) {
	cfg := sharingRules(0.05)
	guest := ratesOf("g0", [3]float64{2, -1, 50}, [3]float64{2, -1, 50}, [3]float64{2, -1, 50})
	guest.gpus = []string{"g0", "g1"}
	members := []pairMember{
		{id: 1, model: "resnet", rates: aloneThenShared("g0", 10, 9.8, true)},
		{id: 5, model: "resnet", rates: aloneThenShared("g1", 10, 7, true)},
		{id: 2, opportunistic: true, model: "lstm", rates: guest},
	}
	got := judgePairs(cfg, members)
	if len(got) != 2 {
		t.Fatalf("%d verdicts, want one per GPU: %+v", len(got), got)
	}
	for _, v := range got {
		if v.guest.id != 2 {
			t.Fatalf("verdict for guest %d, want 2", v.guest.id)
		}
		if want := v.host.id == 5; v.Revert != want {
			t.Errorf("host %d on %s: revert %v, want %v", v.host.id, v.node, v.Revert, want)
		}
	}
}

// introCore is a core with the opportunistic partition "opp", its log in
// buf.
func introCore(t *testing.T, buf *bytes.Buffer) *testCore {
	t.Helper()
	cfg := testConfig(filepath.Join(t.TempDir(), "l.db"))
	cfg.Sharing = config.Sharing{OpportunisticPartition: "opp", Rules: sharingRules(0.05)}
	cfg.Tiresias.Opportunistic.Enabled = true
	cfg.Metrics.Listen = "127.0.0.1:0"
	c := openCoreWith(t, cfg)
	c.log = slog.New(slog.NewTextHandler(buf, nil))
	return c
}

type modelRun string

func (m modelRun) GPUType() string  { return "" }
func (m modelRun) ModelKey() string { return string(m) }

func shardJob(id, uid uint32, partition, model string) Job {
	s := runningAs(id, uid)
	s.OneGPU, s.GPUShare, s.Partition, s.Run = true, true, partition, modelRun(model)
	return s
}

// shardReport is node n1's report at t of one job on GPU gpu.
func shardReport(t int64, job, uid uint32, gpu string, sharers int, util, iters float64) *wire.JobUsageReport {
	e := wire.JobUsage{JobID: job, UID: uid, GPUs: []wire.JobGPUUsage{{UUID: gpu, UtilPct: util, MemUsedMB: 100, Sharers: sharers}}}
	if iters >= 0 {
		e.Progress = &wire.JobProgress{Iterations: uint64(t), ItersPerSec: iters}
	}
	return &wire.JobUsageReport{Node: "n1", At: time.Unix(t, 0), IntervalSec: 10, Jobs: []wire.JobUsage{e}}
}

// runPair: job 1 (owner, guaranteed, model resnet) alone on GPU g0 at
// soloIters, then job 2 (guestUID, opportunistic, model lstm) beside it
// while job 1 runs at sharedIters; hostUID reports for job 1's entries.
// It returns the requeues asked.
func runPair(t *testing.T, c *testCore, hostUID, guestUID uint32, soloIters, sharedIters float64) []requeueRequest {
	t.Helper()
	return runPairAt(t, c, 1000, hostUID, guestUID, soloIters, sharedIters)
}

// runPairAt is runPair from time base (its last pass at base+90; the
// guest came IntroSettle before base+50, so the host's shared rate
// counts from then).
func runPairAt(t *testing.T, c *testCore, base int64, hostUID, guestUID uint32, soloIters, sharedIters float64) []requeueRequest {
	t.Helper()
	pairPassesAt(c, base, hostUID, guestUID, soloIters, sharedIters)
	return drainRequeues(c)
}

// pairPasses runs runPair's passes and leaves what they asked queued.
func pairPasses(c *testCore, hostUID, guestUID uint32, soloIters, sharedIters float64) {
	pairPassesAt(c, 1000, hostUID, guestUID, soloIters, sharedIters)
}

// pairPassesAt is pairPasses from time base.
func pairPassesAt(c *testCore, base int64, hostUID, guestUID uint32, soloIters, sharedIters float64) {
	host := shardJob(1, owner, "gpu", "resnet")
	guest := shardJob(2, guestUID, "opp", "lstm")
	open := base + 50 - introSettleSec // the guest's first report
	pass(c, open-50, host)
	for k := int64(1); k <= 3; k++ {
		c.ReportGPUUse(shardReport(open-50+10*k, 1, hostUID, "g0", 1, 90, soloIters))
	}
	pass(c, open-10, host, guest)
	c.ReportGPUUse(shardReport(open, 1, hostUID, "g0", 2, 60, sharedIters))
	c.ReportGPUUse(shardReport(open, 2, guestUID, "g0", 2, 40, 3))
	for k := int64(5); k <= 8; k++ {
		c.ReportGPUUse(shardReport(base+10*k, 1, hostUID, "g0", 2, 60, sharedIters))
		c.ReportGPUUse(shardReport(base+10*k, 2, guestUID, "g0", 2, 40, 3))
	}
	pass(c, base+90, host, guest)
}

func TestAGuestThatSlowsItsHostBeyondMaxSlowdownIsRequeuedAndThePairMarkedBad(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	got := runPair(t, c, owner, mallory, 10, 8)
	if len(got) != 1 || !sameRequest(got[0], requeueRequest{job: 2, node: "n1"}) {
		t.Fatalf("requeues %+v, want job 2 off n1", got)
	}
	if !strings.Contains(buf.String(), "job 2 requeued: its neighbour job 1 ran 20% slower than alone (max_slowdown 5%)") {
		t.Fatalf("log lacks the revert line:\n%s", buf.String())
	}
	if !c.PairBad("resnet", "lstm", owner, mallory, 1090) {
		t.Fatal("the pair is not marked bad")
	}
	if n := testutil.ToFloat64(c.met.reverts.WithLabelValues(signalIters)); n != 1 {
		t.Fatalf("%s{signal=%q} = %v, want 1", MetricReverts, signalIters, n)
	}
	// Asked once: the next pass, with the guest still running (Slurm has
	// not requeued it yet), does not ask again.
	pass(c, 1100, shardJob(1, owner, "gpu", "resnet"), shardJob(2, mallory, "opp", "lstm"))
	select {
	case r := <-c.intro.queue:
		t.Fatalf("asked again: %+v", r)
	default:
	}
}

func TestAGuestWithinMaxSlowdownIsKeptAndThePairMeasured(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	c.intro.init()
	if err := c.intro.table.Seed("resnet", "lstm", 0.5, 0.7); err != nil {
		t.Fatal(err)
	}
	if got := runPair(t, c, owner, mallory, 10, 9.7); len(got) != 0 {
		t.Fatalf("requeues %+v, want none", got)
	}
	s, measured, ok := c.intro.table.For(party(owner, mallory), 1090).Lookup("resnet", "lstm")
	if !ok || !measured || s.Of < 0.969 || s.Of > 0.971 || s.Beside != 0.7 {
		t.Fatalf("pair %+v measured %v ok %v, want resnet at 0.97 measured, lstm's seed 0.7 kept", s, measured, ok)
	}
	if !strings.Contains(buf.String(), "job 2 kept: its neighbour job 1 ran 3% slower than alone (max_slowdown 5%)") {
		t.Fatalf("log lacks the kept line:\n%s", buf.String())
	}
	if c.PairBad("resnet", "lstm", owner, mallory, 1090) || strings.Contains(buf.String(), "requeued") {
		t.Fatalf("kept pair marked bad or logged as requeued:\n%s", buf.String())
	}
}

// Hostile: progress is the job's own claim. A host's owner can fake a
// slowdown and so evict the opportunistic job beside it (AntMan's
// contract: such jobs yield to guaranteed ones anyway). What no claim may
// do is requeue a guaranteed job, or a job that is not beside the
// claimant, or speak for another user's job.
func TestProgressClaimsCannotRequeueBeyondTheRule(t *testing.T) {
	t.Run("an opportunistic job claiming it slowed gets nothing requeued", func(t *testing.T) {
		var buf bytes.Buffer
		c := introCore(t, &buf)
		defer c.Close()
		host := shardJob(1, owner, "gpu", "resnet")
		guest := shardJob(2, mallory, "opp", "lstm")
		pass(c, 1000, host, guest)
		for k := int64(1); k <= 3; k++ {
			c.ReportGPUUse(shardReport(1000+10*k, 2, mallory, "g0", 1, 90, 100))
		}
		for k := int64(4); k <= 8; k++ {
			c.ReportGPUUse(shardReport(1000+10*k, 2, mallory, "g0", 2, 1, 1))
			c.ReportGPUUse(shardReport(1000+10*k, 1, owner, "g0", 2, 50, 10))
		}
		pass(c, 1090, host, guest)
		if len(c.intro.queue) != 0 {
			t.Fatal("a guest's claim requeued someone")
		}
	})
	t.Run("entries for another user's host are dropped, so its rate cannot be faked", func(t *testing.T) {
		var buf bytes.Buffer
		c := introCore(t, &buf)
		defer c.Close()
		// mallory reports job 1 (owner's) as slowed: the entries are
		// refused (wrong_user), job 1 has no rates, nothing is judged.
		if got := runPair(t, c, mallory, 1003, 10, 1); len(got) != 0 {
			t.Fatalf("requeues %+v from entries in another user's name", got)
		}
	})
	t.Run("a guaranteed job claiming a slowdown beside another guaranteed job requeues nobody", func(t *testing.T) {
		var buf bytes.Buffer
		c := introCore(t, &buf)
		defer c.Close()
		a, b := shardJob(1, mallory, "gpu", "resnet"), shardJob(2, owner, "gpu", "lstm")
		pass(c, 1000, a, b)
		for k := int64(1); k <= 3; k++ {
			c.ReportGPUUse(shardReport(1000+10*k, 1, mallory, "g0", 1, 90, 100))
		}
		for k := int64(4); k <= 8; k++ {
			c.ReportGPUUse(shardReport(1000+10*k, 1, mallory, "g0", 2, 1, 1))
			c.ReportGPUUse(shardReport(1000+10*k, 2, owner, "g0", 2, 50, 10))
		}
		pass(c, 1090, a, b)
		if len(c.intro.queue) != 0 {
			t.Fatal("a guaranteed job was asked to be requeued")
		}
	})
}

func TestRequeuerRunsRequestsAndAsksAgainAfterAFailure(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	c.intro.init()
	c.intro.asked[7] = true
	sj := newFakeSlurm()
	sj.requeueErr = context.DeadlineExceeded
	q := make(chan requeueRequest, 1)
	go c.requeuer(c.stop, q, sj)
	q <- requeueRequest{job: 7, node: "n1"}
	if r := <-sj.requeued; r != 7 {
		t.Fatalf("requeued %d", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		asked := c.intro.asked[7]
		c.mu.Unlock()
		if !asked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a failed requeue stays asked: the next pass would not ask again")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSlurmNodeNameRefusesListsAndRanges(t *testing.T) {
	for name, want := range map[string]bool{"lnode1": true, "gpu-a.1": true, "": false, "n[1-4]": false, "n1,n2": false, "n 1": false,
		strings.Repeat("n", 65): false} {
		if slurmNodeName(name) != want {
			t.Errorf("slurmNodeName(%q) = %v", name, !want)
		}
	}
}

// A bad pair outlives slurmctld: the writer saves it in the ledger
// (bad_pair_marks, with the users who measured it) and the next core
// marks it bad again at start, for those users.
func TestBadPairsAreRememberedAcrossARestart(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	db := c.cfg.DBPath
	base := time.Now().Unix() - 100
	if got := runPairAt(t, c, base, owner, mallory, 10, 5); len(got) != 1 {
		t.Fatalf("requeues %+v, want one", got)
	}
	if err := c.Close(); err != nil { // the writer's last flush
		t.Fatal(err)
	}
	cfg := testConfig(db)
	cfg.Sharing = config.Sharing{OpportunisticPartition: "opp", Rules: sharingRules(0.05)}
	again := openCoreWith(t, cfg)
	defer again.Close()
	now := time.Now().Unix()
	if !again.PairBad("resnet", "lstm", owner, mallory, now) {
		t.Fatal("the bad pair was forgotten by the restart")
	}
	if again.PairBad("resnet", "lstm", owner, owner, now) {
		t.Fatal("after the restart the mark applies to users who did not measure it")
	}
	if again.PairBad("resnet", "a3c", owner, mallory, now) {
		t.Fatal("a pair never marked is bad after the restart")
	}
}

// Issue 34 item 2: a guest Slurm cannot requeue (srun/salloc, or
// --no-requeue) is neither logged nor counted as requeued, and is not
// left on the GPU to be asked about at every pass: it is ended, with the
// reason logged. A requeue that fails for another reason is not counted
// either.
func TestAGuestSlurmCannotRequeueIsEndedNotCountedAsRequeued(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	sj.requeueErr = fmt.Errorf("%w: scontrol: Only batch jobs are accepted or processed for job 2", slurmcmd.ErrNotRequeueable)
	pairPasses(c, owner, mallory, 10, 8)
	if n := c.CarryOutQueued(sj); n != 1 {
		t.Fatalf("carried out %d requests, want the guest's requeue", n)
	}
	if strings.Contains(buf.String(), "job 2 requeued") {
		t.Fatalf("a refused requeue is logged as done:\n%s", buf.String())
	}
	if n := testutil.ToFloat64(c.met.reverts.WithLabelValues(signalIters)); n != 0 {
		t.Fatalf("%s = %v for a requeue Slurm refused, want 0", MetricReverts, n)
	}
	if len(sj.cancelled) != 1 || sj.cancelled[0] != 2 {
		t.Fatalf("cancelled %v, want the guest that cannot be requeued", sj.cancelled)
	}
	if !strings.Contains(buf.String(), "job 2 cancelled: it had to leave its GPU (its neighbour job 1 ran 20% slower than alone") {
		t.Fatalf("log lacks the reason it was ended:\n%s", buf.String())
	}
	// The next pass (it still shows running until Slurm ends it) asks
	// nothing again.
	pass(c, 1100, shardJob(1, owner, "gpu", "resnet"), shardJob(2, mallory, "opp", "lstm"))
	if n := len(c.intro.queue); n != 0 {
		t.Fatalf("asked again %d times", n)
	}

	// Another failure: not counted, asked again.
	var buf2 bytes.Buffer
	c2 := introCore(t, &buf2)
	defer c2.Close()
	sj2 := newFakeSlurm()
	sj2.requeueErr = context.DeadlineExceeded
	pairPasses(c2, owner, mallory, 10, 8)
	c2.CarryOutQueued(sj2)
	if n := testutil.ToFloat64(c2.met.reverts.WithLabelValues(signalIters)); n != 0 || strings.Contains(buf2.String(), "job 2 requeued") || len(sj2.cancelled) != 0 {
		t.Fatalf("a failed requeue: counted %v, cancelled %v, log:\n%s", n, sj2.cancelled, buf2.String())
	}
}

// agentPhase is a stretch of agentRun: until (s), the GPU's sharers
// (the host, guest 2 when guests >= 1, guest 3 when guests >= 2) and the
// host's true rate.
type agentPhase struct {
	until    int64
	guests   int
	hostRate float64
}

// agentRun feeds the host's and guests' introRates the reports a node
// agent sends: the host's loop reports its count every second to the
// agent's own smoothing (jobprogress.Tracker), and every 10 s a usage
// report carries its smoothed rate, the GPU's sharers and the jobs'
// utilisation (the guests report no progress). After each report it
// calls judged with the pass's verdicts.
func agentRun(t *testing.T, phases []agentPhase, judged func(at int64, host *introRates, v []pairVerdict)) {
	t.Helper()
	cfg := sharingRules(0.05)
	tr := jobprogress.New(jobprogress.Config{})
	host, g2, g3 := &introRates{}, &introRates{}, &introRates{}
	iters, now := 0.0, int64(0)
	for _, ph := range phases {
		for now < ph.until {
			now++
			iters += ph.hostRate
			if _, err := tr.Report(1, uint64(iters), time.Unix(now, 0)); err != nil {
				t.Fatal(err)
			}
			if now%10 != 0 {
				continue
			}
			sharers := 1 + ph.guests
			usage := func(util float64) *wire.JobUsage {
				return &wire.JobUsage{GPUs: []wire.JobGPUUsage{{UUID: "g0", Sharers: sharers, UtilPct: util}}}
			}
			e := usage(90)
			if p, ok := tr.Progress(time.Unix(now, 0))[1]; ok {
				e.Progress = &p
			}
			host.observe(e, "n1", now)
			members := []pairMember{{id: 1, uid: owner, model: "resnet", rates: host}}
			for i, g := range []*introRates{g2, g3}[:ph.guests] {
				g.observe(usage(30), "n1", now)
				members = append(members, pairMember{id: uint32(2 + i), uid: mallory, opportunistic: true, model: "lstm", rates: g})
			}
			judged(now, host, judgePairs(cfg, members))
		}
	}
}

// Issue 34 item 4, compute, after the revert: the agent's rate is a
// moving average (wire.ProgressTau), so once the guest that slowed the
// host leaves, the host's rate still carries the slowdown for tens of
// seconds. Judged on that, the guest that stays (guest 2) was requeued
// one pass later for the one that left (guest 3). Now a window's rate
// counts only after IntroSettle: nothing is judged before, and then the
// guest that stays is judged on what it does. A solo window too: a host
// whose guest left is not measured alone on rates that still carry it.
func TestIntrospectionJudgesAWindowOnlyOnceTheAgentsRateSettled(t *testing.T) {
	for _, tc := range []struct {
		name       string
		phases     []agentPhase
		wantRevert bool
	}{
		{"the guest that halved the host leaves, the harmless one stays: kept",
			[]agentPhase{{120, 0, 10}, {300, 2, 5}, {300 + introSettleSec + 60, 1, 10}}, false},
		{"the guest that halved the host leaves, the one that stays slows it 20% itself: requeued",
			[]agentPhase{{120, 0, 10}, {300, 2, 5}, {300 + introSettleSec + 60, 1, 8}}, true},
		{"the host alone again after a guest halved it, then a guest slows it 10%: requeued on the settled solo rate",
			[]agentPhase{{120, 0, 10}, {300, 1, 5}, {400, 0, 10}, {400 + introSettleSec + 60, 1, 9}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last []pairVerdict
			agentRun(t, tc.phases, func(at int64, host *introRates, v []pairVerdict) {
				if len(v) > 0 && at-host.since < introSettleSec {
					t.Fatalf("at %d s, %d s into the window of %d sharers, judged (solo %.2f shared %.2f revert %v): its rate has not settled",
						at, at-host.since, host.sharers, v[0].rates.HostSolo, v[0].rates.HostShared, v[0].Revert)
				}
				last = v
			})
			if len(last) != 1 {
				t.Fatalf("%d verdicts at the end, want the settled window's one", len(last))
			}
			v := last[0]
			if v.signal != signalIters || v.guest.id != 2 || v.Revert != tc.wantRevert {
				t.Fatalf("guest %d on %s (solo %.2f shared %.2f): revert %v, want guest 2 judged on iterations, revert %v",
					v.guest.id, v.signal, v.rates.HostSolo, v.rates.HostShared, v.Revert, tc.wantRevert)
			}
			t.Logf("judged: solo %.3f it/s, shared %.3f it/s (%s%% slower)", v.rates.HostSolo, v.rates.HostShared, pct(sharing.Loss(v.rates.HostSolo, v.rates.HostShared)))
		})
	}
}
