package core

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/sim"
)

// The simulator's sharing is evidence about Lachesis only if slurmctld
// shares the same way, under either opportunistic rule (strict: the
// class below every guaranteed job; default: ranked by attained service,
// evicted only from a worse queue, least run first, upgraded while
// guaranteed jobs wait). This test lets the simulator share a small busy
// cluster (guests kept beside their host, guests reverted for slowing
// their host, a guest reverted as futile, guests promoted to guaranteed),
// then replays the history it produced into the core as slurmctld and the
// node agents would report it (each job's state at each of the
// simulator's passes and right after it, each running job's GPU, sharers
// and iterations per second every second between), playing Slurm for the
// core's requeuer, and checks that the core
//
//   - asks for the same requeues, at the same pass,
//   - marks the same pairs of models bad and no other,
//   - upgrades the same opportunistic jobs at the same pass (one that
//     waited once), and
//   - never keeps an opportunistic job off a node where the simulator
//     starts it, but for its own pins (below), and
//   - evicts, ranks and leaves waiting as the simulator did (checkOrder):
//     the default rule's workload must have an eviction with a choice of
//     victims, a guaranteed job left waiting beside an opportunistic job
//     of its queue, an opportunistic job started ahead of a waiting
//     guaranteed one, and an upgrade while a guaranteed job waits.
//
// Both judge a pair by sharing.Config.JudgePair and learn it by
// sharing.Table.Learn, keep guests off hosts by Choose's rule (Fits in the
// core) and promote by PromoteNow. What the equivalence leaves out, where
// the two differ (docs/architecture.md, "The simulator and slurmctld
// share sharing"):
//
//   - the core judges a pair on measurements only: a host needs samples
//     alone first, and a guest that never ran alone is judged on its
//     host's loss alone (no futility), where the simulator knows every
//     speed; the workload gives every host time alone, and the futile
//     guest a run alone first;
//   - the core keeps a reverted guest off its host's whole node while the
//     host runs (a pin: Slurm cannot steer which GPU a shard lands on),
//     where the simulator only refuses the pair of models; such starts
//     are counted, and the pin checked to be there;
//   - the simulator's moves (MoveAfter, off here) and its placement: in
//     slurmctld Slurm places, steered by the exclusions;
//   - promotion's clock: the simulator counts all of a job's pending time
//     since its submission, the core the time since it last became
//     pending (a job that waited more than once is only checked to be
//     upgraded no earlier), and the simulator counts guaranteed jobs held
//     after a requeue as waiting (none is requeued here);
//   - the memory bound: the simulator has no GPU memory.
//
// Two of the core's measurement windows need what the agents really see,
// which the replay gives them: a requeued job is held (requeueHold), so a
// pass sees it waiting before it starts again (a job restarted before any
// pass saw it waiting would be judged on its old GPU's window until its
// agent reports the new one), and a guest swapped at a pass is not on its
// GPU in the first report after it (a host whose guest is replaced within
// one sample keeps one shared window across both guests, and the second
// is judged on the first's samples too).
func TestCoreAndSimulatorShareTheSameWay(t *testing.T) {
	for _, tc := range []struct {
		name   string
		strict bool
	}{
		{"strict rule: opportunistic jobs wait below every guaranteed one", true},
		{"default rule: opportunistic jobs ranked by service, evicted from a better queue, upgraded while guaranteed jobs wait", false},
	} {
		t.Run(tc.name, func(t *testing.T) { shareTheSameWay(t, tc.strict) })
	}
}

func shareTheSameWay(t *testing.T, strict bool) {
	truth := sharing.NewTable(sharing.Limits{})
	for _, s := range []struct {
		a, b       string
		of, beside float64
	}{
		{"a", "a", 1, 1}, {"b", "b", 1, 1}, {"good", "good", 1, 1}, {"slow", "slow", 1, 1},
		{"futile", "futile", 1, 1}, {"stuck", "stuck", 1, 1},
		{"a", "good", 0.98, 0.6}, {"b", "good", 0.99, 0.7}, // kept
		{"a", "slow", 0.80, 0.9}, {"b", "slow", 0.85, 0.9}, // the host slowed: reverted
		{"a", "futile", 0.97, 0.02}, {"b", "futile", 0.99, 0.5}, // futile beside a, kept beside b
		{"a", "stuck", 0.5, 0.5}, {"b", "stuck", 0.5, 0.5}, // reverted beside both: it waits, and is promoted
	} {
		if err := truth.Seed(s.a, s.b, s.of, s.beside); err != nil {
			t.Fatal(err)
		}
	}
	// A promoted guest is a host like any guaranteed job: beside it, the
	// other guests fit.
	guests := []string{"good", "slow", "futile", "stuck"}
	for i, g := range guests {
		for _, o := range guests[i+1:] {
			if err := truth.Seed(g, o, 0.99, 0.9); err != nil {
				t.Fatal(err)
			}
		}
	}
	rules := sharing.DefaultConfig()
	rules.PromoteAfter, rules.MoveAfter = 60, 0
	rules.StrictOpportunistic = strict
	cfg := sim.DefaultConfig()
	cfg.Shape = sim.Shape{Nodes: 2, GPUsPerNode: 2, CPUsPerNode: 8, MemGBNode: 64}
	cfg.Models = sim.ModelsAsGiven
	cfg.NoCosts()
	cfg.PassInterval, cfg.TickPassesOnly, cfg.RequeueHold = passInterval, true, requeueHold
	cfg.RecordRuns = true
	cfg.Sharing = &sim.SharingConfig{On: true, Rules: rules, Pairs: truth, Learn: true}
	jobs, tcfg := strictSharingWorkload(&cfg)
	if !strict {
		jobs, tcfg = defaultSharingWorkload(&cfg)
	}
	res, err := sim.Run(cfg, &sim.Trace{Name: "sharing-equivalence", Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	h := sharingHistoryOf(t, res, jobs)
	kept, slowed, futile := 0, 0, 0
	for _, p := range h.pairs {
		switch {
		case p.Judged == 0:
		case !p.Reverted:
			kept++
		case p.Of < 1-rules.MaxSlowdown:
			slowed++
		default:
			futile++
		}
	}
	if kept == 0 || slowed == 0 || (strict && futile == 0) || len(h.promoted) == 0 {
		t.Fatalf("the workload must keep, revert for the host, revert as futile (strict) and promote; got %d, %d, %d, %d", kept, slowed, futile, len(h.promoted))
	}
	t.Logf("simulator: %d pairs (%d kept, %d reverted for their host, %d futile), %d promotions", len(h.pairs), kept, slowed, futile, len(h.promoted))
	replaySharingIntoCore(t, rules, tcfg, jobs, h)
}

// strictSharingWorkload is the strict rule's history: FIFO order (the
// opportunistic jobs wait outside it, so the guests the workload needs
// wait long enough to pair and be promoted), guests kept beside their
// host, reverted for slowing it, reverted as futile, and promoted; nil:
// the core's Tiresias configuration is the test's.
func strictSharingWorkload(cfg *sim.Config) ([]sim.Job, *priority.Config) {
	opp := sharing.Opportunistic
	cfg.Policy = sim.PolicyFIFO
	return []sim.Job{
		{ID: 1, Submit: 0, GPUs: 1, Duration: 600, Model: "a"},
		{ID: 2, Submit: 0, GPUs: 1, Duration: 600, Model: "a"},
		{ID: 3, Submit: 0, GPUs: 1, Duration: 600, Model: "b"},
		{ID: 4, Submit: 0, GPUs: 1, Duration: 200, Model: "futile", Class: opp}, // alone on the idle GPU
		// Asks for more of a GPU than any host leaves: it waits, and is
		// promoted at promote_after.
		{ID: 5, Submit: 0, GPUs: 1, Duration: 200, Model: "good", Class: opp, Share: 0.9},
		{ID: 6, Submit: 20, GPUs: 1, Duration: 600, Model: "b"}, // takes job 4's GPU back
		{ID: 7, Submit: 30, GPUs: 1, Duration: 200, Model: "good", Class: opp},
		{ID: 8, Submit: 30, GPUs: 1, Duration: 200, Model: "slow", Class: opp},
		{ID: 9, Submit: 40, GPUs: 1, Duration: 200, Model: "stuck", Class: opp},
	}, nil
}

// defaultSharingWorkload is the default rule's history, under Tiresias
// (las, one threshold) in the simulator as in the core, so that both
// order by priority.Ranker: jobs 4 and 5 run alone on idle GPUs, job 5
// from 10 s on; guests pair, are reverted and wait, and job 7 is
// upgraded at promote_after while guaranteed jobs wait; at 100 s, both
// alone jobs in the worse queue, the upgraded job 7 evicts job 5, whose
// run is shorter, and job 4 keeps running; guaranteed jobs then wait
// beside opportunistic jobs of their own queue, which they may not
// evict; job 11, arriving at 290 s with no service, starts ahead of the
// upgraded jobs 4 and 5, which have service of their queue 1, and they
// wait beside it. Guaranteed jobs never preempt one another (min_run):
// the evictions are the class's alone.
func defaultSharingWorkload(cfg *sim.Config) ([]sim.Job, *priority.Config) {
	opp := sharing.Opportunistic
	tcfg := priority.DefaultConfig()
	tcfg.FixThresholds([]float64{defaultThreshold})
	// Guaranteed jobs never preempt each other here: the evictions are
	// the opportunistic class's.
	tcfg.Preemption.MinRun = 1e6
	tcfg.InheritService = false
	cfg.Policy = sim.PolicyLAS
	cfg.PolicyOptions.Tiresias = tcfg
	return []sim.Job{
		{ID: 1, Submit: 0, GPUs: 1, Duration: 900, Model: "a"},
		{ID: 2, Submit: 0, GPUs: 1, Duration: 900, Model: "b"},
		{ID: 3, Submit: 0, GPUs: 1, Duration: 10, Model: "a"},
		{ID: 4, Submit: 0, GPUs: 1, Duration: 180, Model: "futile", Class: opp},
		{ID: 5, Submit: 5, GPUs: 1, Duration: 300, Model: "slow", Class: opp},
		{ID: 6, Submit: 30, GPUs: 1, Duration: 200, Model: "good", Class: opp},
		{ID: 7, Submit: 30, GPUs: 1, Duration: 200, Model: "slow", Class: opp},
		{ID: 8, Submit: 40, GPUs: 1, Duration: 200, Model: "stuck", Class: opp},
		{ID: 9, Submit: 120, GPUs: 1, Duration: 150, Model: "a"},
		{ID: 10, Submit: 175, GPUs: 1, Duration: 600, Model: "b"},
		{ID: 11, Submit: 290, GPUs: 1, Duration: 100, Model: "stuck", Class: opp},
	}, &tcfg
}

const defaultThreshold = 50

// sharingHistory is what the simulator's sharing did. Passes, arrivals,
// pairs and requeues fall on whole seconds (its pass ticks); completions
// do not (a host beside a guest runs slower).
type sharingHistory struct {
	jobs     map[uint32]sim.Job
	runs     map[uint32][]replayRun
	finish   map[uint32]float64
	pairs    []sim.PairRecord
	promoted map[uint32]int64
	end      int64
}

// replayRun is one run as the node agents see it: its node and GPU (a
// guest's are its host's), and its host while it is a guest.
type replayRun struct {
	start, end float64
	node, gpu  int
	host       uint32 // 0: alone
	pair       int    // its pair in sharingHistory.pairs, when a guest
}

func sharingHistoryOf(t *testing.T, res *sim.Result, jobs []sim.Job) sharingHistory {
	t.Helper()
	whole := func(v float64) int64 {
		if v != math.Trunc(v) {
			t.Fatalf("time %v is not a whole second", v)
		}
		return int64(v)
	}
	if res.SharingHistory == nil {
		t.Fatal("no sharing history")
	}
	h := sharingHistory{jobs: map[uint32]sim.Job{}, runs: map[uint32][]replayRun{}, finish: map[uint32]float64{},
		pairs: res.SharingHistory.Pairs, promoted: map[uint32]int64{}}
	for _, j := range jobs {
		h.jobs[j.ID] = j
	}
	for _, j := range res.Jobs {
		h.finish[j.ID] = j.Finish
		h.end = max(h.end, int64(math.Ceil(j.Finish)))
	}
	for _, p := range res.SharingHistory.Promoted {
		h.promoted[p.Job] = whole(p.At)
	}
	// Each run in start order, runs of jobs alone before guests starting
	// at the same time: a job alone takes the lowest GPU of its node free
	// then; a guest takes its host's, which stays busy while the guest
	// keeps it after its host ended.
	guest := func(r sim.RunRecord) bool {
		for _, p := range h.pairs {
			if p.Guest == r.JobID && p.Start == r.Start {
				return true
			}
		}
		return false
	}
	runs := slices.Clone(res.Runs)
	sort.SliceStable(runs, func(a, b int) bool {
		if runs[a].Start != runs[b].Start {
			return runs[a].Start < runs[b].Start
		}
		return !guest(runs[a]) && guest(runs[b])
	})
	type busy struct {
		until float64
	}
	gpus := [][]busy{make([]busy, 2), make([]busy, 2)}
	for _, r := range runs {
		rr := replayRun{start: float64(whole(r.Start)), end: r.End, node: -1, gpu: -1, pair: -1}
		for i, p := range h.pairs {
			if p.Guest == r.JobID && p.Start == rr.start {
				rr.pair, rr.host = i, p.Host
			}
		}
		// A guest holds no GPU of its own (its run has the node's slot
		// only when it kept the GPU after its host ended).
		if rr.pair < 0 {
			if len(r.Slots) != 1 {
				t.Fatalf("job %d's run from %v is no guest and holds %d slots", r.JobID, rr.start, len(r.Slots))
			}
			rr.node = r.Slots[0].Node
			for g := range gpus[rr.node] {
				if gpus[rr.node][g].until <= rr.start {
					rr.gpu = g
					break
				}
			}
			if rr.gpu < 0 {
				t.Fatalf("job %d starts at %v on node %d with no GPU free", r.JobID, rr.start, rr.node)
			}
			gpus[rr.node][rr.gpu].until = rr.end
		} else {
			for _, hr := range h.runs[rr.host] {
				if hr.start <= rr.start && rr.start < hr.end {
					rr.node, rr.gpu = hr.node, hr.gpu
				}
			}
			gpus[rr.node][rr.gpu].until = max(gpus[rr.node][rr.gpu].until, rr.end)
		}
		h.runs[r.JobID] = append(h.runs[r.JobID], rr)
	}
	return h
}

// runAt is job id's run at now (started before it, ending at or after
// it: a run the scheduler ends at now still runs when the pass at now
// looks), if any; a job that completed by now runs no more.
func (h *sharingHistory) runAt(id uint32, now int64) (replayRun, bool) {
	t := float64(now)
	if h.finish[id] <= t {
		return replayRun{}, false
	}
	for _, r := range h.runs[id] {
		if r.start < t && t <= r.end {
			return r, true
		}
	}
	return replayRun{}, false
}

// isRunning says whether job id runs at now.
func (h *sharingHistory) isRunning(id uint32, now int64) bool {
	_, ok := h.runAt(id, now)
	return ok
}

// snapshotsAt is what slurmctld reports at now: completions and arrivals
// of now are in (the simulator handles them before its pass), the pass's
// own starts and requeues are not.
func (h *sharingHistory) snapshotsAt(now int64, reported map[uint32]bool) []Snapshot {
	var snaps []Snapshot
	for id := uint32(1); int(id) <= len(h.jobs); id++ {
		j := h.jobs[id]
		if int64(j.Submit) > now || reported[id] {
			continue
		}
		s := Snapshot{ID: id, State: StatePending, SubmitTime: base + int64(j.Submit), User: 2000 + id,
			Partition: "gpu", RequeueAllowed: true, GPUs: 1, GresRequest: gres.Request{Nodes: 1}}
		if j.Class == sharing.Opportunistic {
			s.Partition = "opp"
		}
		runs := h.runs[id]
		switch r, running := h.runAt(id, now); {
		case h.finish[id] <= float64(now):
			last := runs[len(runs)-1]
			s.State, s.StartTime, s.EndTime, s.EndState = StateFinished, base+int64(last.start), base+int64(h.finish[id]), EndCompleted
			reported[id] = true
		case running:
			s.State, s.StartTime, s.Run = StateRunning, base+int64(r.start), &fakeRun{model: j.Model}
			s.NodeGPUs = 2
			// On shards of a GPU (the shard rewrite's): a guaranteed job,
			// and a guest beside it; an opportunistic job alone holds its
			// GPU whole.
			if j.Class != sharing.Opportunistic || r.host != 0 {
				s.GPUs, s.GPUShare = 0, true
			}
		default:
			s.Asked = askedModel(j.Model)
			for _, r := range runs {
				if r.end <= float64(now) {
					s.EndTime = base + int64(r.end) // requeued then
					s.BeginTime = s.EndTime + 10    // and held
				}
			}
		}
		snaps = append(snaps, s)
	}
	return snaps
}

// reportsAt are the node agents' reports of second at, the reports of a
// pass interval coming from its second second on: each running job's GPU,
// its sharers and its iterations per second (1 alone, its pair's speed
// beside its host or guest). A guest placed at the pass is not on its GPU
// yet in the first report (its processes start, or its predecessor's end,
// within the second), so a host whose guest was swapped at once is seen
// alone in between, as the agents would see it.
func (h *sharingHistory) reportsAt(at int64) []*wire.JobUsageReport {
	type onGPU struct {
		job   uint32
		speed float64
	}
	var gpus [2][2][]onGPU
	for id := uint32(1); int(id) <= len(h.jobs); id++ {
		r, ok := h.runAt(id, at)
		if !ok || (r.host != 0 && r.start == float64(at-2)) {
			continue
		}
		gpus[r.node][r.gpu] = append(gpus[r.node][r.gpu], onGPU{job: id, speed: 1})
	}
	var out []*wire.JobUsageReport
	for n := range gpus {
		rep := &wire.JobUsageReport{Node: fmt.Sprintf("n%d", n), At: time.Unix(base+at, 0), IntervalSec: 1}
		for g, on := range gpus[n] {
			for k := range on {
				if r, _ := h.runAt(on[k].job, at); r.host != 0 && len(on) == 2 {
					p := h.pairs[r.pair]
					on[k].speed = p.GuestSpeed
					on[1-k].speed = p.Of
				}
			}
			for _, o := range on {
				rep.Jobs = append(rep.Jobs, wire.JobUsage{JobID: o.job, UID: 2000 + o.job, Progress: &wire.JobProgress{Iterations: uint64(at), ItersPerSec: o.speed},
					GPUs: []wire.JobGPUUsage{{Index: g, UUID: fmt.Sprintf("n%d-g%d", n, g), UtilPct: 50, MemUsedMB: 100, Sharers: len(on)}}})
			}
		}
		if len(rep.Jobs) > 0 {
			out = append(out, rep)
		}
	}
	return out
}

// replaySlurm plays Slurm for the core's requeuer: it records the
// requeues asked and keeps each job's ExcNodeList, edited only while the
// job waits after the simulator's pass (Slurm edits pending jobs only).
type replaySlurm struct {
	h *sharingHistory
	// at: the jobs are as the simulator's history has them at at, and
	// those requeued since are pending.
	at       int64
	requeued map[uint32]bool
	lists    map[uint32]string
	requeues []string
}

func (f *replaySlurm) Requeue(_ context.Context, job uint32) error {
	f.requeues = append(f.requeues, fmt.Sprintf("t=%d: job %d", f.at, job))
	f.requeued[job] = true
	return nil
}

func (f *replaySlurm) Cancel(_ context.Context, job uint32) error {
	return fmt.Errorf("job %d: the replay's guests are all batch jobs, never cancelled", job)
}

func (f *replaySlurm) ExcNodeList(_ context.Context, job uint32) (string, bool, error) {
	if (f.h.isRunning(job, f.at) && !f.requeued[job]) || f.h.finish[job] <= float64(f.at) {
		return "", false, nil
	}
	return f.lists[job], true, nil
}

func (f *replaySlurm) SetExcNodeList(_ context.Context, job uint32, list string) error {
	f.lists[job] = list
	return nil
}

func (f *replaySlurm) Hostnames(_ context.Context, list string) ([]string, error) {
	return strings.Split(list, ","), nil
}

func replaySharingIntoCore(t *testing.T, rules sharing.Config, tcfg *priority.Config, jobs []sim.Job, h sharingHistory) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "ledger.db")
	ccfg := testConfig(db)
	if tcfg != nil {
		ccfg.Tiresias = *tcfg
	}
	ccfg.Sharing = config.Sharing{OpportunisticPartition: "opp", Rules: rules} // no seeds: the simulator learns too
	ccfg.Tiresias.Opportunistic = priority.Opportunistic{Enabled: true, Rules: rules}
	ccfg.Tiresias.Preemption.StrictOpportunistic = rules.StrictOpportunistic
	c := openCoreWith(t, ccfg)
	// The history's reports carry the simulator's exact rates, not an
	// agent's moving average: windows count at once, as in the simulator.
	c.sharing.AssumeExactRates()
	var clock int64
	c.clock = func() int64 { return clock }
	slurm := &replaySlurm{h: &h, lists: map[uint32]string{}, requeued: map[uint32]bool{}}
	var want []string
	for _, p := range h.pairs {
		if p.Reverted {
			want = append(want, fmt.Sprintf("t=%d: job %d", int64(p.Judged), p.Guest))
		}
	}
	var problems []string
	pinnedStarts, promotedSame, promotedLater := 0, 0, 0
	var order orderCounts
	reported := map[uint32]bool{}
	for tick := int64(0); tick <= h.end+passInterval; tick += passInterval {
		// The pass at tick sees the state before the simulator's pass at
		// tick; Slurm carries out what it asked before the simulator's
		// pass places anyone.
		clock = base + tick
		pass(c, base+tick, h.snapshotsAt(tick, reported)...)
		problems = append(problems, h.checkOrder(c, tick, &order)...)
		slurm.at = tick
		c.sharing.CarryOutQueued(slurm)
		// Every opportunistic job the simulator starts at tick starts on
		// a node the core does not keep it off, but for its pins.
		for id, runs := range h.runs {
			if h.jobs[id].Class != sharing.Opportunistic {
				continue
			}
			for _, r := range runs {
				if r.start != float64(tick) {
					continue
				}
				node := fmt.Sprintf("n%d", r.node)
				kept := slices.Contains(strings.Split(slurm.lists[id], ","), node)
				if host, pinned := h.pinnedOff(id, r.node, tick); pinned {
					pinnedStarts++
					if !kept {
						problems = append(problems, fmt.Sprintf("t=%d: job %d, reverted from beside job %d on %s, is not kept off it while job %d runs", tick, id, host, node, host))
					}
					continue
				}
				if kept {
					problems = append(problems, fmt.Sprintf("t=%d: the simulator starts job %d on %s, which the core keeps it off (ExcNodeList %s)", tick, id, node, slurm.lists[id]))
				}
			}
		}
		// The pass after the simulator's sees its starts and requeues;
		// the agents report every second until the next.
		clock = base + tick + 1
		pass(c, base+tick+1, h.snapshotsAt(tick+1, reported)...)
		slurm.at = tick + 1
		clear(slurm.requeued)
		c.sharing.CarryOutQueued(slurm)
		for at := tick + 2; at <= tick+passInterval; at++ {
			for _, rep := range h.reportsAt(at) {
				c.sharing.ReportGPUUse(rep)
			}
		}
	}
	slices.Sort(want)
	slices.Sort(slurm.requeues)
	if !slices.Equal(want, slurm.requeues) {
		problems = append(problems, fmt.Sprintf("requeues: the simulator reverted %v, the core asked %v", want, slurm.requeues))
	}
	for _, p := range h.pairs {
		if p.Judged == 0 {
			continue
		}
		// Each job is its own user's (2000 + id): the mark is the pair
		// of users' who measured it (issue 34).
		if bad := c.sharing.PairBad(p.HostModel, p.GuestModel, 2000+p.Host, 2000+p.Guest, clock); bad != p.Reverted {
			problems = append(problems, fmt.Sprintf("pair %s beside %s: bad in the core %v, reverted by the simulator %v", p.GuestModel, p.HostModel, bad, p.Reverted))
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	for _, j := range jobs {
		rec, ok, err := reopened.Get(j.ID)
		if err != nil || !ok {
			t.Fatalf("job %d: no ledger record (%v)", j.ID, err)
		}
		at, promoted := h.promoted[j.ID]
		switch {
		case !promoted:
			if rec.Upgraded != 0 {
				problems = append(problems, fmt.Sprintf("job %d: upgraded by the core at %d, never promoted by the simulator", j.ID, rec.Upgraded-base))
			}
		case h.waitedOnce(j.ID, at):
			// At the simulator's pass, or at the core's pass right after
			// the simulator's previous one (the simulator decides at its
			// passes only).
			if u := rec.Upgraded - base; u != at && u != at-passInterval+1 {
				problems = append(problems, fmt.Sprintf("job %d: upgraded by the core at %d, promoted by the simulator at %d", j.ID, u, at))
			}
			promotedSame++
		default:
			// The simulator counts every wait since the submission, the
			// core the last: the core promotes no earlier, if at all.
			if u := rec.Upgraded - base; rec.Upgraded != 0 && u < at-passInterval+1 {
				problems = append(problems, fmt.Sprintf("job %d: upgraded by the core at %d, before the simulator promoted it at %d", j.ID, u, at))
			}
			promotedLater++
		}
	}
	t.Logf("core: %d requeues; %d promotions at the simulator's pass, %d of jobs that waited more than once (left out); %d starts on a node the core had pinned the job off",
		len(slurm.requeues), promotedSame, promotedLater, pinnedStarts)
	t.Logf("core: %d evictions (%d with a victim left running), %d guaranteed jobs left waiting beside opportunistic ones, %d opportunistic starts ahead of a waiting guaranteed job, %d upgrades while a guaranteed job waited",
		order.evictions, order.leastRun, order.refused, order.ahead, order.upgradedBusy)
	if promotedSame == 0 {
		problems = append(problems, "no promotion of a job that waited once: the workload must have one")
	}
	if !rules.StrictOpportunistic && (order.leastRun == 0 || order.refused == 0 || order.ahead == 0 || order.upgradedBusy == 0) {
		problems = append(problems, "the default rule's workload must evict with a choice of victims, leave a guaranteed job waiting beside an opportunistic one of its queue, start an opportunistic job ahead of a waiting guaranteed one and upgrade one while a guaranteed job waits")
	}
	if len(problems) > 0 {
		t.Fatalf("%d differences:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// orderCounts counts what checkOrder saw, so that a workload that
// exercises none of it is caught.
type orderCounts struct {
	evictions, leastRun, refused, ahead, upgradedBusy int
}

// guaranteedAt says whether job id is guaranteed at the simulator's pass
// at now: submitted guaranteed, or promoted by then.
func (h *sharingHistory) guaranteedAt(id uint32, now int64) bool {
	at, promoted := h.promoted[id]
	return h.jobs[id].Class != sharing.Opportunistic || (promoted && at <= now)
}

// aloneAt is job id's run alone (no guest) at now, if any.
func (h *sharingHistory) aloneAt(id uint32, now int64) (replayRun, bool) {
	r, ok := h.runAt(id, now)
	return r, ok && r.host == 0
}

// waitingAt says whether job id waits at now, eligible to start (not
// held after a requeue).
func (h *sharingHistory) waitingAt(id uint32, now int64) bool {
	j := h.jobs[id]
	if int64(j.Submit) > now || h.finish[id] <= float64(now) || h.isRunning(id, now) {
		return false
	}
	for _, r := range h.runs[id] {
		if r.end <= float64(now) && r.end+requeueHold > float64(now) {
			return false
		}
	}
	return true
}

// startsAt says whether one of job id's runs starts at now.
func (h *sharingHistory) startsAt(id uint32, now int64) bool {
	return slices.ContainsFunc(h.runs[id], func(r replayRun) bool { return r.start == float64(now) })
}

// checkOrder compares the simulator's pass at now with the core's rule,
// as of the core's pass at now (the state before the simulator's):
//
//   - an opportunistic job alone on its GPU whose run the simulator ends
//     at now before its finish, a guaranteed job starting then, is a
//     victim the core lets one of them evict (priority.Preemption.Decide),
//     and the core offers Slurm no opportunistic job that job may evict
//     and the simulator kept before it (VictimOrder, CompareVictims:
//     least run first by default);
//   - a guaranteed job the simulator leaves waiting at now may evict no
//     opportunistic job the simulator keeps running alone then (under
//     the default rule: none of its queue or a better one);
//   - an opportunistic job the simulator starts alone at now while an
//     eligible guaranteed job keeps waiting is ranked ahead of it by the
//     core (by attained service, under the default rule);
//   - an upgrade at now while a guaranteed job waits is counted.
func (h *sharingHistory) checkOrder(c *Core, now int64, n *orderCounts) []string {
	var problems []string
	var starting, waiting, victims, kept []uint32
	for id := uint32(1); int(id) <= len(h.jobs); id++ {
		switch {
		case h.guaranteedAt(id, now) && h.startsAt(id, now):
			starting = append(starting, id)
		case h.guaranteedAt(id, now) && h.waitingAt(id, now):
			waiting = append(waiting, id)
		case h.guaranteedAt(id, now):
		default:
			if _, alone := h.aloneAt(id, now); !alone {
				continue
			}
			if r, _ := h.runAt(id, now); r.end == float64(now) && h.finish[id] > float64(now) {
				victims = append(victims, id)
			} else {
				kept = append(kept, id)
			}
		}
	}
	for _, v := range victims {
		n.evictions++
		var by []uint32
		for _, p := range starting {
			if c.Preemptable(p, v) {
				by = append(by, p)
			}
		}
		if len(by) == 0 {
			problems = append(problems, fmt.Sprintf("t=%d: the simulator evicted job %d, which no guaranteed job starting then (%v) may evict in the core", now, v, starting))
			continue
		}
		for _, w := range kept {
			for _, p := range by {
				if c.Preemptable(p, w) {
					n.leastRun++
					if c.VictimOrder(w) < c.VictimOrder(v) {
						problems = append(problems, fmt.Sprintf("t=%d: the simulator evicted job %d for job %d and kept job %d, which the core offers Slurm first", now, v, p, w))
					}
				}
			}
		}
		c.Preempting(v, base+now)
	}
	for _, g := range waiting {
		for _, w := range kept {
			n.refused++
			if c.Preemptable(g, w) {
				problems = append(problems, fmt.Sprintf("t=%d: the simulator leaves job %d waiting beside opportunistic job %d, which the core lets it evict", now, g, w))
			}
		}
	}
	for o := uint32(1); int(o) <= len(h.jobs); o++ {
		if h.guaranteedAt(o, now) || !slices.ContainsFunc(h.runs[o], func(r replayRun) bool { return r.start == float64(now) && r.host == 0 }) {
			continue
		}
		for _, g := range waiting {
			n.ahead++
			if po, pg := c.decisions[o].Priority, c.decisions[g].Priority; po <= pg {
				problems = append(problems, fmt.Sprintf("t=%d: the simulator starts opportunistic job %d ahead of waiting job %d, which the core ranks first (%d <= %d)", now, o, g, po, pg))
			}
		}
	}
	for id, at := range h.promoted {
		if at == now && slices.ContainsFunc(waiting, func(g uint32) bool { return g != id }) {
			n.upgradedBusy++
		}
	}
	return problems
}

// waitedOnce: job id had waited in one stretch when it was promoted at
// at (before, it ran from its submission or a requeue on without
// waiting, if at all): the simulator's clock and the core's agree on it.
func (h *sharingHistory) waitedOnce(id uint32, at int64) bool {
	last := float64(h.jobs[id].Submit)
	waits := 0
	for _, r := range h.runs[id] {
		if r.start > float64(at) {
			break
		}
		if r.start > last {
			waits++
		}
		last = r.end
	}
	if last < float64(at) {
		waits++
	}
	return waits <= 1
}

// pinnedOff: job id was reverted from beside a host on node at most an
// hour (gpushare's pin) before now, and that host still runs there.
func (h *sharingHistory) pinnedOff(id uint32, node int, now int64) (uint32, bool) {
	for _, p := range h.pairs {
		if p.Guest != id || !p.Reverted || int64(p.Judged) > now || now-int64(p.Judged) >= 3600 {
			continue
		}
		if r, ok := h.runAt(p.Host, now); ok && r.node == node {
			return p.Host, true
		}
	}
	return 0, false
}

var _ gpushare.SlurmJobs = (*replaySlurm)(nil)

// The simulator's pass interval (the core passes at each of its passes
// and right after), and how long a requeued job waits before it may
// start again (Slurm's is 121 s).
const (
	passInterval = 10
	requeueHold  = 30
)
