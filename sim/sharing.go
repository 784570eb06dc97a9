package sim

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// SharingConfig is GPU sharing between guaranteed and opportunistic jobs
// (package sharing: AntMan's classes, Gandiva's introspection).
//
// With On, a job of class opportunistic runs only on what guaranteed jobs
// leave: idle whole GPUs (taken back the moment a guaranteed job needs
// them: an opportunistic job is always the first victim, never counted as
// a policy preemption, and never preempts), and, for a one-GPU job, a share
// of the GPU of a running one-GPU guaranteed job whose usage leaves room
// (sharing.Table.Usage below 1, and the job's own share, if it asked for
// one, within that room) and whom it is predicted not to slow down by more
// than Rules.MaxSlowdown (sharing.Config.Choose). At the pass after a pair
// starts, the guaranteed job's measured rate beside its guest is compared
// with its solo rate (sharing.Config.Revert): the guest is requeued and the
// pair marked bad, or the measurement is kept in the scheduler's table; a
// pair is packed and kept only if the two jobs together do more than the
// host alone (sharing.Gains, the guest at its share's limit). An
// opportunistic job pending for Rules.PromoteAfter in total is promoted to
// guaranteed (sharing.Config.PromoteNow).
//
// By default opportunistic jobs stand in the policy's order like any job
// (by attained service under las and gittins): in the main walk they take
// idle GPUs in their turn but preempt nothing; a guaranteed job evicts
// only those of a worse level (a worse Tiresias queue), the one whose run
// has lasted least first (evictFor); a promoted job keeps its place. Under
// Rules.StrictOpportunistic they stay out of the order, take only what
// the guaranteed jobs leave, any guaranteed job evicts them, and one is
// promoted only at a pass where no guaranteed job waits, joining the
// order as a job submitted then. When a guest's host ends, the
// guest keeps the GPU alone (Slurm's shards stay allocated); when the host
// is preempted, the guest is requeued with it. A guest that has shared for
// Rules.MoveAfter is requeued while a GPU stays idle after the waiting
// opportunistic jobs were placed, to restart alone (sharing.Config.Move).
//
// Both jobs of a pair run at their pair-table fractions of their speed
// alone (Pairs, the truth: Gavel's measurements). A guest that asked for a
// share s of the GPU is limited to it (CUDA MPS's active thread
// percentage): it runs at most at s/u of its solo speed, u its model's
// usage. A guest holds no CPUs or memory of the node in the simulation,
// and a GPU holds at most one guest (the pair table knows pairs).
//
// With MultiGPUGuests (Slurm 23.11's MULTIPLE_SHARING_GRES_PJ: shards of
// several GPUs of a node in one job), an opportunistic job of k > 1 GPUs
// may also go as a guest on k GPUs of one node: the node's idle GPUs (all
// their shards; at most k − 1, held like an opportunistic job's GPUs: a
// guaranteed job takes them back by requeueing it) and, for the rest,
// GPUs each held by a running one-GPU guaranteed job that leaves room and
// that Choose's rule lets it go beside (placeMultiGuests). It runs at the
// slowest of its pairs' fractions (its GPUs step together), each host at
// its own pair's. Each pair is judged by the revert rule; one reverted
// pair requeues the guest. When one of its hosts ends, the guest runs on,
// that GPU now its own (Slurm leaves its shards allocated; TakenOver), or
// is requeued where the node lacks the CPUs or memory (HostEnded). With
// Shape.GPUCountOnly the cluster is one pool without nodes, so there a
// guest may go beside any hosts: an upper bound on what one node allows.
//
// Off, jobs run exactly as without a SharingConfig (class and share are
// ignored: every job takes whole GPUs); only the models are drawn and the
// sharing report (Result.Sharing) computed, so an off and an on run of the
// same trace compare.
type SharingConfig struct {
	On    bool
	Rules sharing.Config
	// Pairs is how pairs really run; the scheduler starts from a copy of
	// it, or from an empty table with Learn (every pair is then a trial,
	// measured and kept or reverted).
	Pairs *sharing.Table
	Learn bool
	// MultiGPUGuests lets a multi-GPU opportunistic job be a guest on
	// several GPUs of one node (Slurm 23.11+; off: guests of one GPU, as
	// on Slurm 22.05).
	MultiGPUGuests bool
}

// shareState is a run's sharing bookkeeping.
type shareState struct {
	cfg     SharingConfig
	known   *sharing.Table
	usage   map[string]float64
	opps    []*JobState // opportunistic, arrived, not done, not promoted
	oppGPUs int         // GPUs opportunistic jobs hold alone
	horizon float64     // the last submission: the window of the report
	idleTo  float64     // idle GPU-time is accounted up to here
	sum     SharingSummary
	// scratch for placing guests
	models []string
	queues map[string][]*JobState
	// hist: with Config.RecordRuns, every pair and promotion (Result's
	// SharingHistory); open: each guest's pair in hist.Pairs.
	hist *SharingHistory
	open map[*JobState]int
	// leastRunFirst orders the opportunistic victims evictFor may take
	// under the default rule as slurmctld's core numbers them for Slurm
	// (priority.Preemption.CompareVictims): the run that has lasted
	// least first, then the lowest ranked.
	leastRunFirst func(a, b *JobState) int
}

// SharingHistory is what a run's sharing did, for checking it against
// slurmctld's (internal/controller/core's sharing equivalence test): kept
// with Config.RecordRuns. A guest's run beside its host is in Result.Runs
// (with no slots: it holds none of the node).
type SharingHistory struct {
	Pairs    []PairRecord
	Promoted []PromotionRecord
}

// PairRecord is one guest placed beside one host.
type PairRecord struct {
	Host, Guest           uint32
	HostModel, GuestModel string
	// Start: when the guest started beside the host; its run ends with
	// the pair.
	Start float64
	// Of is the host's speed beside the guest and GuestSpeed the guest's
	// (its share's limit included), each a fraction of alone.
	Of, GuestSpeed float64
	// Judged: when the revert rule judged the pair (0: never); Reverted:
	// the guest was requeued for it; Moved: requeued to run alone
	// (SharingConfig's Rules.MoveAfter).
	Judged          float64
	Reverted, Moved bool
}

// PromotionRecord is an opportunistic job promoted to guaranteed.
type PromotionRecord struct {
	Job uint32
	At  float64
}

// pairRecord is g's open pair in the history, nil without one.
func (sh *shareState) pairRecord(g *JobState) *PairRecord {
	if sh.hist == nil {
		return nil
	}
	i, ok := sh.open[g]
	if !ok {
		return nil
	}
	return &sh.hist.Pairs[i]
}

// SharingSummary is a run's sharing report. The window is from the first
// to the last submission, while jobs keep arriving: utilisation over the
// whole makespan would hide what sharing changes, since every job does its
// work in the end.
type SharingSummary struct {
	On bool `json:"on"`
	// WindowSeconds is the report's window.
	WindowSeconds float64 `json:"window_s"`
	// AllocUtil is the GPU-time jobs held alone (whole GPUs) in the
	// window over the cluster's; a guest adds nothing to it.
	AllocUtil float64 `json:"alloc_util"`
	// UsefulUtil is the useful GPU-time in the window over the cluster's:
	// each running job counts its GPUs × its speed relative to alone (1
	// alone, its pair fraction while it shares: a job at 0.7 of its solo
	// speed counts 0.7 of a GPU), so a GPU whose pair does more than its
	// host alone counts more than 1; restart penalties count as allocated,
	// not useful. (A model's usage, its share of a GPU's cycles, decides
	// room beside it, not how useful its work is.)
	UsefulUtil float64 `json:"useful_util"`
	// WorkGPUHours is the work done in the window (GPU-hours at the
	// proportional share's speed), and WorkPerHour that per hour: the
	// cluster's throughput.
	WorkGPUHours float64 `json:"work_gpu_hours"`
	WorkPerHour  float64 `json:"work_per_hour"`
	// IdleUtil is the GPU-time in the window no job held, over the
	// cluster's. IdleOppWaiting is the part of it while an opportunistic
	// job that could start (no requeue hold) waited for more GPUs than
	// were idle (it never preempts: the GPUs stay idle unless a guaranteed
	// job takes them), IdleGuarWaiting the part while a guaranteed job
	// waited (requeue holds included); they overlap. Where useful
	// utilisation falls with sharing on, they say whether GPUs stood idle
	// while work waited (docs/evaluation, section 8).
	IdleUtil        float64 `json:"idle_util"`
	IdleOppWaiting  float64 `json:"idle_while_opp_waits"`
	IdleGuarWaiting float64 `json:"idle_while_guar_waits"`
	// Per class as submitted (a promoted job stays opportunistic here).
	Guaranteed    ClassSummary `json:"guaranteed"`
	Opportunistic ClassSummary `json:"opportunistic"`
	// Requeues of opportunistic jobs: taken back by a guaranteed job
	// (Evicted), by the revert rule (Reverted), with their preempted host
	// (HostPreempted), guests moved to run alone (Moved).
	Evicted       int `json:"evicted"`
	Reverted      int `json:"reverted"`
	HostPreempted int `json:"host_preempted"`
	Moved         int `json:"moved"`
	// Promoted opportunistic jobs; Pairs started beside a guaranteed job,
	// Trials of them on unmeasured pairs; TakenOver: guests that kept the
	// GPU when their host ended.
	Promoted  int `json:"promoted"`
	Pairs     int `json:"pairs"`
	Trials    int `json:"trials"`
	TakenOver int `json:"taken_over"`
	// MultiGPUGuests: guests placed on shares of several GPUs of a node
	// (each host's GPU also counts in Pairs); HostEnded: such guests
	// requeued because one of their hosts ended and the node could not
	// give them its GPU (SharingConfig).
	MultiGPUGuests int `json:"multi_gpu_guests"`
	HostEnded      int `json:"host_ended"`
}

// ClassSummary is one class's outcome.
type ClassSummary struct {
	Jobs      int     `json:"jobs"`
	AvgJCT    float64 `json:"avg_jct_s"`
	MedianJCT float64 `json:"median_jct_s"`
	// AvgFirstStart is the mean time from submission to a job's first
	// start (Gandiva's early feedback).
	AvgFirstStart float64 `json:"avg_first_start_s"`
	// FinishedInWindow counts jobs done by the window's end; PerHour is
	// that over the window.
	FinishedInWindow int     `json:"finished_in_window"`
	PerHour          float64 `json:"finished_per_hour"`
}

// MarkOpportunistic marks a share of a trace's jobs opportunistic, for
// traces without classes: job i is marked when splitmix64(seed ⊕ ID ⊕
// "oppo") / 2⁶⁴ < share, so the draw depends only on the seed and the
// job's ID, and a larger share marks a superset.
func MarkOpportunistic(t *Trace, share float64, seed uint64) int {
	n := 0
	for i := range t.Jobs {
		x := splitmix64(seed ^ uint64(t.Jobs[i].ID) ^ 0x6f70706f)
		if float64(x>>11)/(1<<53) < share {
			t.Jobs[i].Class = sharing.Opportunistic
			n++
		}
	}
	return n
}

// pairModel is the model a job's interference is looked up by: its own
// when the table knows it, else drawn like GavelAssign draws (a model
// name, then one of its batch sizes) by splitmix64(seed ⊕ ID ⊕ "shar").
func pairModel(job *Job, byName map[string][]string, names []string, usage map[string]float64, seed uint64) string {
	if _, ok := usage[job.Model]; ok {
		return job.Model
	}
	x := splitmix64(seed ^ uint64(job.ID) ^ 0x73686172)
	variants := byName[names[x%uint64(len(names))]]
	return variants[splitmix64(x)%uint64(len(variants))]
}

func (e *engine) initSharing(trace *Trace) error {
	sc := *e.cfg.Sharing
	if sc.Pairs == nil {
		return fmt.Errorf("%w: sharing needs a pair table", ErrBadConfig)
	}
	if err := sc.Rules.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if e.cfg.Hetero != nil {
		return fmt.Errorf("%w: sharing on a heterogeneous cluster is not simulated", ErrBadConfig)
	}
	sh := &shareState{cfg: sc, usage: map[string]float64{}, queues: map[string][]*JobState{}}
	byName := map[string][]string{}
	for _, m := range sc.Pairs.Models() {
		u, _ := sc.Pairs.Usage(m)
		sh.usage[m] = u
		base, _, _ := strings.Cut(m, "/bs")
		byName[base] = append(byName[base], m)
	}
	if len(byName) == 0 {
		return fmt.Errorf("%w: the pair table has no model paired with itself", ErrBadConfig)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for i := range e.jobs {
		j := &e.jobs[i]
		j.pairModel = pairModel(&j.Job, byName, names, sh.usage, e.cfg.Seed)
		j.usage = sh.usage[j.pairModel]
		j.shareFactor = 1
	}
	if sc.Learn {
		sh.known = sharing.NewTable(sharing.DefaultLimits())
	} else {
		sh.known = sc.Pairs.Clone()
	}
	sh.horizon = trace.Jobs[len(trace.Jobs)-1].Submit
	sh.sum.On = sc.On
	if e.cfg.RecordRuns {
		sh.hist, sh.open = &SharingHistory{}, map[*JobState]int{}
	}
	var rule priority.Preemption // the default rule: StrictOpportunistic off
	sh.leastRunFirst = func(a, b *JobState) int {
		now := e.cluster.now
		return rule.CompareVictims(nil, a.oppVictim(now), b.oppVictim(now))
	}
	e.sh = sh
	return nil
}

// sharingOn says whether classes and shares take effect in this run.
func (e *engine) sharingOn() bool { return e.sh != nil && e.sh.cfg.On }

// oppHeld is the GPUs opportunistic jobs hold alone: free for any
// guaranteed job that needs them.
func (e *engine) oppHeld() int {
	if e.sh == nil {
		return 0
	}
	return e.sh.oppGPUs
}

// segment accounts j's run from its last speed change to now (clipped to
// the window) in the sharing report.
func (e *engine) segment(j *JobState, now float64) {
	if e.sh == nil {
		return
	}
	h := e.sh.horizon
	from := max(j.segFrom, j.ProgressFrom)
	j.segFrom = now
	if held := j.Job.GPUs; j.host == nil || j.ownGPUs() > 0 {
		if j.host != nil {
			held = j.ownGPUs() // a guest's idle GPUs beside its shares
		}
		// Allocated from the run's start or the last change, penalty included.
		if a, b := max(j.allocFrom, 0), min(now, h); b > a {
			e.sh.sum.AllocUtil += float64(held) * (b - a)
		}
	}
	j.allocFrom = now
	if a, b := from, min(now, h); b > a {
		g := float64(j.Job.GPUs)
		e.sh.sum.UsefulUtil += g * j.shareFactor * (b - a)
		e.sh.sum.WorkGPUHours += g * j.Speed * (b - a) / 3600
	}
}

// idle accounts the cluster's idle GPUs from the last event to t (clipped
// to the window): the loop calls it before each event, so the cluster and
// the queues are as they were since the last one.
func (e *engine) idle(t float64) {
	sh := e.sh
	a, b := sh.idleTo, min(t, sh.horizon)
	sh.idleTo = max(sh.idleTo, t)
	free := e.cluster.freeGPUs
	if b <= a || free == 0 {
		return
	}
	gs := float64(free) * (b - a)
	sh.sum.IdleUtil += gs
	if e.pending > 0 {
		sh.sum.IdleGuarWaiting += gs
	}
	for _, j := range sh.opps {
		if j.Status == Pending && j.eligibleAt <= a && j.Job.GPUs > free {
			sh.sum.IdleOppWaiting += gs
			break
		}
	}
}

// setSpeed changes a running job's speed at now, keeping its progress;
// factor is its speed relative to alone (the pair fraction while it shares).
func (e *engine) setSpeed(j *JobState, speed, factor, now float64) {
	e.segment(j, now)
	j.shareFactor = factor
	j.Remaining = j.RemainingAt(now)
	if now > j.ProgressFrom {
		j.progressTime += now - j.ProgressFrom
		j.ProgressFrom = now
	}
	j.Speed = speed
	j.maxSpeed = max(j.maxSpeed, speed)
	j.seq++
	e.heap.push(completion{at: j.ProgressFrom + j.Remaining/speed, job: j, seq: j.seq})
}

// sharePrePass runs before the policy's order: the revert rule on pairs
// that ran since the last pass, and promotions.
func (e *engine) sharePrePass(now float64) {
	sh := e.sh
	for _, g := range sh.opps {
		h := g.host
		if h == nil || g.pairChecked || g.pairedAt >= now {
			continue
		}
		// Introspection, as slurmctld runs it (sharing.JudgePair, then
		// Table.Learn), on the table's truth: the host alone at 1 and at
		// truth.Of beside its guest, the guest at its speed beside the host
		// (its share's limit included). The table learns the pair's own
		// fractions: a share's limit is the guest's, applied when it is
		// placed (sharePostPass).
		// A guest of several GPUs: each pair judged, one revert requeues it.
		revert := false
		for i := -1; i < len(g.coHosts); i++ {
			if i >= 0 {
				h = g.coHosts[i]
			}
			truth, _, _ := sh.cfg.Pairs.Lookup(h.pairModel, g.pairModel)
			v := sh.cfg.Rules.JudgePair(sharing.PairRates{HostSolo: 1, HostShared: truth.Of, GuestSolo: 1, GuestShared: g.shareFactor})
			_, _ = sh.known.Learn(h.pairModel, g.pairModel, v, truth.Of, truth.Beside)
			if p := sh.pairRecord(g); p != nil && i < 0 {
				p.Judged, p.Reverted = now, v.Revert
			}
			revert = revert || v.Revert
		}
		if revert {
			sh.sum.Reverted++
			e.requeueOpp(g, now)
			continue
		}
		g.pairChecked = true
	}
	kept := sh.opps[:0]
	for _, j := range sh.opps {
		switch {
		case j.Status == Done:
			continue
		case j.Status == Pending && sh.cfg.Rules.PromoteNow(j.waitedAt(now), e.pending):
			j.opp = false
			sh.sum.Promoted++
			if sh.hist != nil {
				sh.hist.Promoted = append(sh.hist.Promoted, PromotionRecord{Job: j.Job.ID, At: now})
			}
			e.pending++
			if !sh.cfg.Rules.StrictOpportunistic {
				// It stood in the policy's order already, and keeps its
				// place there (priority.Ranker keeps its queue entry).
				continue
			}
			// No guaranteed job waits (e.pending counts them, requeue holds
			// included). It joins the guaranteed class as an arrival of now:
			// FIFO and age order it by now, and its waiting for Tiresias's
			// starvation promotion counts from now (sharing.Config.Promote).
			// Its service so far stays.
			j.Account.QueueEntry = int64(math.Floor(now))
			j.Account.WaitingSince = j.Account.QueueEntry
			j.entry = now
			e.active = append(e.active, j)
			continue
		}
		kept = append(kept, j)
	}
	clear(sh.opps[len(kept):])
	sh.opps = kept
}

// waitedAt is the time j has spent pending since its submission.
func (j *JobState) waitedAt(now float64) float64 {
	if j.Status == Pending {
		return j.waited + now - j.pendingSince
	}
	return j.waited
}

// sharePostPass places opportunistic jobs after the guaranteed ones, and
// returns when the next pass must act for them: a promotion falling due
// or a new pair to measure.
func (e *engine) sharePostPass(now float64) float64 {
	sh, c := e.sh, e.cluster
	next := math.Inf(1)
	moved := 0
	// Idle whole GPUs first, in arrival order.
	for _, j := range sh.opps {
		if j.Status != Pending || j.eligibleAt > now || !c.couldFit(j.Job.GPUs) {
			continue
		}
		if speed, ok := c.placeFree(j); ok {
			e.start(j, speed, now)
			sh.oppGPUs += j.Job.GPUs
		}
	}
	// Guests that have shared for MoveAfter are requeued while GPUs stay
	// idle, one per idle GPU, to start alone once their hold ends.
	for _, g := range sh.opps {
		if c.freeGPUs-moved <= 0 {
			break
		}
		if c.freeGPUs-moved < g.Job.GPUs {
			continue // a guest of several GPUs moves only to as many idle ones
		}
		if g.host != nil && g.Status == Running && sh.cfg.Rules.Move(now-g.pairedAt) {
			sh.sum.Moved++
			if p := sh.pairRecord(g); p != nil {
				p.Moved = true
			}
			moved += g.Job.GPUs
			e.requeueOpp(g, now)
			if g.eligibleAt <= now && c.couldFit(g.Job.GPUs) {
				// No requeue hold: it takes the idle GPU in this pass.
				if speed, ok := c.placeFree(g); ok {
					e.start(g, speed, now)
					sh.oppGPUs += g.Job.GPUs
				}
			}
		}
	}
	// Then shares beside one-GPU guaranteed jobs: for each host, the
	// waiting model (oldest job of each) that the rules choose.
	sh.models = sh.models[:0]
	for _, j := range sh.opps {
		if j.Status != Pending || j.eligibleAt > now || j.Job.GPUs != 1 {
			continue
		}
		if len(sh.queues[j.pairModel]) == 0 {
			sh.models = append(sh.models, j.pairModel)
		}
		sh.queues[j.pairModel] = append(sh.queues[j.pairModel], j)
	}
	if len(sh.models) > 0 {
		for _, h := range e.order {
			if len(sh.models) == 0 {
				break
			}
			if h.Status != Running || h.opp || h.Job.GPUs != 1 || h.guest != nil || h.usage >= 1 {
				continue
			}
			room := 1 - h.usage
			var fits []string
			for _, m := range sh.models {
				head := sh.queues[m][0]
				if head.Job.Share > room+1e-9 {
					continue
				}
				// A guest limited to its share gains less beside the host
				// than the table's pair (sharing.Gains on what it would run at).
				if s, _, ok := sh.known.Lookup(h.pairModel, m); ok && !sharing.Gains(sharing.Speeds{Of: s.Of, Beside: s.Beside * head.shareLimit()}) {
					continue
				}
				fits = append(fits, m)
			}
			ch, ok := sh.cfg.Rules.Choose(sh.known, h.pairModel, fits)
			if !ok {
				continue
			}
			m := fits[ch.Index]
			g := sh.queues[m][0]
			sh.queues[m] = sh.queues[m][1:]
			if len(sh.queues[m]) == 0 {
				sh.models = slices.DeleteFunc(sh.models, func(x string) bool { return x == m })
			}
			e.startGuest(g, h, now)
			if ch.Unmeasured {
				sh.sum.Trials++
			}
			next = min(next, now+max(e.cfg.PassInterval, 1))
		}
		for _, m := range sh.models {
			clear(sh.queues[m])
			sh.queues[m] = sh.queues[m][:0]
		}
		clear(sh.queues)
	}
	if sh.cfg.MultiGPUGuests && e.placeMultiGuests(now) {
		next = min(next, now+max(e.cfg.PassInterval, 1))
	}
	for _, j := range sh.opps {
		if j.Status == Pending {
			next = min(next, now+max(sh.cfg.Rules.PromoteAfter-j.waitedAt(now), 0))
			if j.eligibleAt > now {
				next = min(next, j.eligibleAt)
			}
		}
	}
	return next
}

// startGuest starts opportunistic job g beside guaranteed job h on h's GPU.
func (e *engine) startGuest(g, h *JobState, now float64) {
	sh := e.sh
	truth, _, _ := sh.cfg.Pairs.Lookup(h.pairModel, g.pairModel)
	g.host, h.guest = h, g
	g.pairedAt, g.pairChecked = now, false
	sh.sum.Pairs++
	limit := g.shareLimit()
	e.start(g, truth.Beside*limit, now)
	g.shareFactor = truth.Beside * limit
	if sh.hist != nil {
		sh.open[g] = len(sh.hist.Pairs)
		sh.hist.Pairs = append(sh.hist.Pairs, PairRecord{Host: h.Job.ID, Guest: g.Job.ID, HostModel: h.pairModel, GuestModel: g.pairModel,
			Start: now, Of: truth.Of, GuestSpeed: g.shareFactor})
	}
	h.soloSpeed = h.Speed
	e.setSpeed(h, h.soloSpeed*truth.Of, truth.Of, now)
}

// placeMultiGuests places waiting opportunistic jobs of several GPUs, in
// arrival order, as guests on shares of as many GPUs of one node, each
// GPU held by a running one-GPU guaranteed job without a guest whose usage
// leaves the guest's share and whose pair with the guest Choose's rule
// allows (Fits, with Gains at the guest's share limit). On the first node
// (by index) with enough such hosts it takes the hosts the table predicts
// lose least. It says whether it placed one (a pair to measure at the next
// pass).
func (e *engine) placeMultiGuests(now float64) bool {
	sh := e.sh
	placed := false
	var byNode map[int32][]*JobState
	for _, g := range sh.opps {
		if g.Status != Pending || g.eligibleAt > now || g.Job.GPUs < 2 {
			continue
		}
		if byNode == nil {
			// The hosts that are free of a guest, by node, in the policy's
			// order; rebuilt only when a pass has such a guest waiting.
			byNode = map[int32][]*JobState{}
			for _, h := range e.order {
				if h.Status == Running && h.Job.GPUs == 1 && h.guest == nil && h.usage < 1 && len(h.slots) == 1 {
					byNode[h.slots[0].node] = append(byNode[h.slots[0].node], h)
				}
			}
		}
		type cand struct {
			h          *JobState
			of         float64
			unmeasured bool
		}
		var best []cand
		bestNode := int32(-1)
		var own slot
		for n, hs := range byNode {
			// Idle GPUs of the node first (no interference), hosts for the
			// rest; at least one host (else placeFree had placed it).
			idle := min(e.cluster.free[n].GPUs, g.Job.GPUs-1)
			var s slot
			if idle > 0 {
				var ok bool
				if s, _, ok = e.cluster.grant(g, int(n), e.cluster.free[n], idle); !ok {
					idle = 0
				}
			}
			need := g.Job.GPUs - idle
			if len(hs) < need || (bestNode >= 0 && n > bestNode) {
				continue
			}
			var fits []cand
			for _, h := range hs {
				if h.guest != nil || g.Job.Share > 1-h.usage+1e-9 {
					continue
				}
				ok, of := sh.cfg.Rules.Fits(sh.known, h.pairModel, g.pairModel)
				if !ok {
					continue
				}
				s, _, held := sh.known.Lookup(h.pairModel, g.pairModel)
				if held && !sharing.Gains(sharing.Speeds{Of: s.Of, Beside: s.Beside * g.shareLimit()}) {
					continue
				}
				fits = append(fits, cand{h: h, of: of, unmeasured: !held})
			}
			if len(fits) < need {
				continue
			}
			// Least predicted loss first; unmeasured pairs (of 0) last.
			slices.SortStableFunc(fits, func(a, b cand) int {
				switch {
				case a.of > b.of:
					return -1
				case a.of < b.of:
					return 1
				}
				return 0
			})
			best, bestNode, own = fits[:need], n, slot{}
			if idle > 0 {
				own = s
			}
		}
		if bestNode < 0 {
			continue
		}
		hosts := make([]*JobState, len(best))
		trial := false
		for i, c := range best {
			hosts[i] = c.h
			trial = trial || c.unmeasured
		}
		e.startMultiGuest(g, hosts, own, now)
		if trial {
			sh.sum.Trials++
		}
		placed = true
	}
	return placed
}

// startMultiGuest starts opportunistic job g as a guest on the GPUs of
// hosts, one each, and on own (idle GPUs it holds; none when own.gpus is
// 0): it runs at the slowest of its pairs' fractions (its share's limit
// included), each host at its own pair's.
func (e *engine) startMultiGuest(g *JobState, hosts []*JobState, own slot, now float64) {
	sh := e.sh
	g.host, g.coHosts = hosts[0], hosts[1:]
	if own.gpus > 0 {
		c := e.cluster
		c.plan = append(c.plan[:0], own)
		c.take(g)
		sh.oppGPUs += int(own.gpus)
	}
	g.pairedAt, g.pairChecked = now, false
	beside := math.Inf(1)
	for _, h := range hosts {
		truth, _, _ := sh.cfg.Pairs.Lookup(h.pairModel, g.pairModel)
		beside = min(beside, truth.Beside)
	}
	sh.sum.Pairs += len(hosts)
	sh.sum.MultiGPUGuests++
	limit := g.shareLimit()
	e.start(g, beside*limit, now)
	g.shareFactor = beside * limit
	for i, h := range hosts {
		truth, _, _ := sh.cfg.Pairs.Lookup(h.pairModel, g.pairModel)
		h.guest = g
		if sh.hist != nil && i == 0 {
			sh.open[g] = len(sh.hist.Pairs)
			sh.hist.Pairs = append(sh.hist.Pairs, PairRecord{Host: h.Job.ID, Guest: g.Job.ID, HostModel: h.pairModel, GuestModel: g.pairModel,
				Start: now, Of: truth.Of, GuestSpeed: g.shareFactor})
		}
		h.soloSpeed = h.Speed
		e.setSpeed(h, h.soloSpeed*truth.Of, truth.Of, now)
	}
}

// unpairOthers ends the sharing of g's hosts other than except (a guest
// of several GPUs; nothing for a guest of one): they run alone again.
func (e *engine) unpairOthers(g, except *JobState, now float64) {
	if len(g.coHosts) == 0 {
		if except == nil && g.host != nil {
			e.unpair(g.host, g, now)
		}
		return
	}
	if h := g.host; h != except {
		e.unpair(h, g, now)
	}
	for _, h := range g.coHosts {
		if h == except {
			continue
		}
		h.guest = nil
		if h.Status == Running {
			e.setSpeed(h, h.soloSpeed, 1, now)
		}
	}
	g.coHosts = nil
	if except != nil {
		g.host = except // its caller unpairs it
	}
}

// ownGPUs is the GPUs a guest holds of the node beside its shares (idle
// GPUs a guest of several GPUs took), 0 for one that is not a guest.
func (j *JobState) ownGPUs() int {
	if j.host == nil {
		return 0
	}
	n := 0
	for _, s := range j.slots {
		n += int(s.gpus)
	}
	return n
}

// multiHostEnded: host h of g, a guest of several GPUs (or of one GPU
// and idle ones), completed on node. As in Slurm, whose shards stay
// allocated, the guest runs on: h's GPU becomes its own (TakenOver), it
// runs at the slowest of its remaining pairs' fractions, and with no host
// left it is an opportunistic job on GPUs alone. Where the node cannot
// give it the GPU (CPUs or memory) it is requeued (HostEnded).
func (e *engine) multiHostEnded(h *JobState, node int32, now float64) {
	g := h.guest
	c := e.cluster
	gs, speed, ok := c.grant(g, int(node), c.free[node], 1)
	if !ok {
		e.sh.sum.HostEnded++
		e.preempt(g, now)
		e.unpairOthers(g, h, now)
		h.guest, g.host = nil, nil
		return
	}
	e.segment(g, now) // up to now with what it held
	h.guest = nil
	if g.host == h {
		g.host = nil
		if len(g.coHosts) > 0 {
			g.host, g.coHosts = g.coHosts[0], g.coHosts[1:]
		}
	} else {
		g.coHosts = slices.DeleteFunc(g.coHosts, func(x *JobState) bool { return x == h })
	}
	if len(g.coHosts) == 0 {
		g.coHosts = nil
	}
	// The GPU joins what g holds on the node.
	c.adjust(int(node), -1, -int(gs.cpus), -gs.memGB)
	merged := false
	for k := range g.slots {
		if g.slots[k].node == node {
			g.slots[k].gpus++
			g.slots[k].cpus += gs.cpus
			g.slots[k].memGB += gs.memGB
			merged = true
		}
	}
	if !merged {
		g.slots = append(g.slots, gs)
		c.jobsOn[node] = append(c.jobsOn[node], g)
	}
	e.sh.oppGPUs++
	e.sh.sum.TakenOver++
	g.allocFrom = now
	factor := 1.0
	for k := -1; k < len(g.coHosts) && g.host != nil; k++ {
		x := g.host
		if k >= 0 {
			x = g.coHosts[k]
		}
		truth, _, _ := e.sh.cfg.Pairs.Lookup(x.pairModel, g.pairModel)
		factor = min(factor, truth.Beside*g.shareLimit())
	}
	if g.host == nil {
		factor = 1
	}
	e.setSpeed(g, min(speed, 1)*factor, factor, now)
}

// shareLimit is the most of its solo speed a guest that asked for a share
// s of the GPU runs at beside a host: s/u, u its model's usage (an MPS
// thread limit), 1 without a share.
func (j *JobState) shareLimit() float64 {
	if s := j.Job.Share; s > 0 && j.usage > s {
		return s / j.usage
	}
	return 1
}

// unpair ends h's sharing with its guest g at now: h runs alone again.
func (e *engine) unpair(h, g *JobState, now float64) {
	h.guest, g.host = nil, nil
	if h.Status == Running {
		e.setSpeed(h, h.soloSpeed, 1, now)
	}
}

// requeueOpp requeues an opportunistic job (a guest or one on idle GPUs).
func (e *engine) requeueOpp(j *JobState, now float64) {
	if h := j.host; h != nil {
		e.preempt(j, now)
		e.unpairOthers(j, h, now)
		e.unpair(h, j, now)
		return
	}
	e.preempt(j, now)
}

// hostEnded lets the guest of a host that completed keep its GPU alone,
// or requeues it where the node cannot give it the GPU.
func (e *engine) hostEnded(h *JobState, node int32, now float64) {
	g := h.guest
	c := e.cluster
	s, speed, ok := c.grant(g, int(node), c.free[node], 1)
	if !ok {
		// Requeued as a guest: it held no GPU of its own.
		e.sh.sum.HostPreempted++
		e.preempt(g, now)
		h.guest, g.host = nil, nil
		return
	}
	e.segment(g, now) // a guest up to now: nothing allocated to it
	h.guest, g.host = nil, nil
	// The guest's run goes on: its GPU becomes its own allocation (a guest
	// of one GPU holds none of the node before: multiHostEnded otherwise).
	c.plan = append(c.plan[:0], s)
	c.take(g)
	e.sh.oppGPUs++
	e.sh.sum.TakenOver++
	g.allocFrom = now
	e.setSpeed(g, speed, 1, now)
}

func (e *engine) sharingSummary(r *Result) *SharingSummary {
	if e.sh == nil {
		return nil
	}
	s := e.sh.sum
	h := e.sh.horizon
	gpus := float64(e.cfg.Shape.GPUs())
	s.WindowSeconds = h
	if h > 0 {
		s.AllocUtil /= gpus * h
		s.UsefulUtil /= gpus * h
		s.IdleUtil /= gpus * h
		s.IdleOppWaiting /= gpus * h
		s.IdleGuarWaiting /= gpus * h
		s.WorkPerHour = s.WorkGPUHours / (h / 3600)
	}
	var jct [2][]float64
	var first [2]float64
	var cs [2]*ClassSummary = [2]*ClassSummary{&s.Guaranteed, &s.Opportunistic}
	for i, jr := range r.Jobs {
		k := 0
		if e.jobs[i].Job.Class == sharing.Opportunistic {
			k = 1
		}
		jct[k] = append(jct[k], jr.JCT)
		first[k] += jr.FirstStart - jr.Submit
		if jr.Finish <= h {
			cs[k].FinishedInWindow++
		}
	}
	for k := range cs {
		n := len(jct[k])
		cs[k].Jobs = n
		if n == 0 {
			continue
		}
		var sum float64
		for _, v := range jct[k] {
			sum += v
		}
		slices.Sort(jct[k])
		cs[k].AvgJCT = sum / float64(n)
		cs[k].MedianJCT = Median(jct[k])
		cs[k].AvgFirstStart = first[k] / float64(n)
		if h > 0 {
			cs[k].PerHour = float64(cs[k].FinishedInWindow) / (h / 3600)
		}
	}
	return &s
}

// SharingVariants replaces each variant by one per mode ("off", "on",
// "multi": on with MultiGPUGuests), all
// with base's tables and rules, labelled LABEL/sharing-MODE.
func SharingVariants(variants []Variant, base SharingConfig, modes []string) ([]Variant, error) {
	var out []Variant
	for _, v := range variants {
		for _, m := range modes {
			sc := base
			switch m {
			case "off":
				sc.On = false
			case "on":
				sc.On = true
			case "multi":
				// On, with guests on shares of several GPUs of a node
				// (Slurm 23.11+).
				sc.On, sc.MultiGPUGuests = true, true
			default:
				return nil, fmt.Errorf("%w: sharing mode %q is not off, on or multi", ErrBadConfig, m)
			}
			w := v
			w.Label += "/sharing-" + m
			w.Config.Sharing = &sc
			out = append(out, w)
		}
	}
	return out, nil
}
