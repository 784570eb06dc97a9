package core

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// preemptionState is what the core keeps of preemption between passes;
// under mu.
type preemptionState struct {
	// view: who may preempt whom, as of the last pass.
	view preemptView
	// notes: why each job was last let be preempted.
	notes map[uint32]preemptNote
	// events: preemptions Slurm carried out since the last pass
	// (Preempting).
	events map[uint32]preemptEvent
	// blocked: preemptions the rule refused lately (blocked.go).
	blocked blockedPreemptions
}

// preemptView is what the core knows about preemption between passes, kept
// so that preempt/tiresias can tell Slurm cheaply that nobody can preempt
// anybody. With preemption enabled, Slurm's schedulers ask, for every
// waiting job they try, which running jobs it could requeue, and the select
// plugin then tests the job again with those jobs removed: that work is
// wasted for a job that can preempt nobody. Guarded by Core.mu.
type preemptView struct {
	// worstRunning is the highest (worst) queue among guaranteed GPU jobs
	// running at the last pass; -1 when none ran.
	worstRunning int
	// bestPending is the lowest (best) queue among pending guaranteed GPU
	// jobs of the last pass and those enqueued since; math.MaxInt when
	// none. Opportunistic jobs preempt nothing, so they count in neither.
	bestPending int
	// opportunisticRunning: some opportunistic GPU job ran at the last
	// pass, so any pending guaranteed GPU job may preempt.
	opportunisticRunning bool
	// gpu holds the jobs that use GPUs (last pass, and placements since),
	// with what the preemption rule needs of them besides their queue.
	gpu map[uint32]preemptTraits
	// victimOrder numbers the GPU jobs running at the last pass in the
	// order Slurm is to take them as victims, from 1 (first taken), by
	// priority.Preemption.CompareVictims: the order the simulator's
	// preemption uses. floor and running are its scratch.
	victimOrder map[uint32]uint32
	floor       priority.PreemptionFloor
	running     []victimEntry
}

// preemptTraits is what the preemption rule needs of a job's Slurm record:
// its partition's PriorityTier, its job array and whether Slurm may
// requeue it; and of its last decision, whether it is opportunistic.
//
// With quotas, also its quota class as of the last pass (QuotaOff for a
// job enqueued since) and its account.
type preemptTraits struct {
	tier, array   uint32
	noRequeue     bool
	opportunistic bool
	quota         priority.QuotaClass
	account       string
}

func traitsOf(s *Snapshot, opportunistic bool) preemptTraits {
	return preemptTraits{tier: s.PartitionTier, array: s.ArrayJobID, noRequeue: !s.RequeueAllowed, opportunistic: opportunistic}
}

// victimEntry is one running GPU job while the victim order is built.
type victimEntry struct {
	id uint32
	priority.Victim
}

// orderVictims numbers the running GPU jobs of a pass (results[k] is the
// decision for jobs[k]) by rule's victim order; preemptions gives a job's
// preemptions so far and how long its current run has lasted. It runs
// after fromPass, whose traits it reads.
func (v *preemptView) orderVictims(rule priority.Preemption, jobs []priority.Job, results []priority.Result, ofVictim func(id uint32) (preemptions int, ran float64)) {
	if v.victimOrder == nil {
		v.victimOrder = make(map[uint32]uint32, len(jobs))
	}
	clear(v.victimOrder)
	v.floor.Reset()
	v.running = v.running[:0]
	for k := range results {
		j := &jobs[k]
		if j.GPUs == 0 || j.State != priority.Running {
			continue
		}
		preemptions, ran := ofVictim(j.ID)
		e := victimEntry{id: j.ID, Victim: priority.Victim{Queue: results[k].Queue, Preemptions: preemptions,
			Rank: results[k].Rank, RunSeconds: ran, NoRequeue: v.gpu[j.ID].noRequeue, Opportunistic: results[k].Opportunistic}}
		if !e.Opportunistic {
			v.floor.Add(e.Queue, e.Preemptions)
		}
		v.running = append(v.running, e)
	}
	slices.SortFunc(v.running, func(a, b victimEntry) int {
		return rule.CompareVictims(&v.floor, a.Victim, b.Victim)
	})
	for i, e := range v.running {
		v.victimOrder[e.id] = uint32(i + 1)
	}
}

// fromPass rebuilds the view from a pass's ranked jobs (results[k] is the
// decision for jobs[k], snapshot(k) the job's snapshot).
func (v *preemptView) fromPass(jobs []priority.Job, results []priority.Result, snapshot func(k int) *Snapshot) {
	if v.gpu == nil {
		v.gpu = make(map[uint32]preemptTraits, len(jobs))
	}
	clear(v.gpu)
	v.worstRunning, v.bestPending, v.opportunisticRunning = -1, math.MaxInt, false
	for k := range results {
		j := &jobs[k]
		if j.GPUs == 0 {
			continue
		}
		opp := results[k].Opportunistic
		t := traitsOf(snapshot(k), opp)
		if j.Quota != priority.QuotaOff {
			t.quota, t.account = j.Quota, strings.ToLower(snapshot(k).Account)
		}
		v.gpu[j.ID] = t
		q := results[k].Queue
		switch {
		case opp && j.State == priority.Running:
			v.opportunisticRunning = true
		case opp: // waits, and preempts nothing
		case j.State == priority.Running:
			v.worstRunning = max(v.worstRunning, q)
		default:
			v.bestPending = min(v.bestPending, q)
		}
	}
}

// enqueued notes a job enqueued between passes (submitted, requeued, released):
// it waits in queue d.Queue, and until the next pass it is the view's only
// source for the job's GPUs.
func (v *preemptView) enqueued(s *Snapshot, d Decision) {
	if s.gpuCount() == 0 {
		return
	}
	if v.gpu == nil {
		v.gpu = make(map[uint32]preemptTraits)
		v.worstRunning, v.bestPending = -1, math.MaxInt
	}
	t := traitsOf(s, d.Opportunistic)
	if before, ok := v.gpu[s.ID]; ok {
		t.quota, t.account = before.quota, before.account
	}
	v.gpu[s.ID] = t
	if !d.Opportunistic {
		v.bestPending = min(v.bestPending, d.Queue)
	}
}

// possible reports whether some waiting guaranteed GPU job sits in a
// better queue than some running guaranteed GPU job, or waits while an
// opportunistic GPU job runs: otherwise no job can preempt any other.
func (v *preemptView) possible() bool {
	return v.gpu != nil && (v.bestPending < v.worstRunning || (v.bestPending != math.MaxInt && v.opportunisticRunning))
}

// PreemptionPossible reports whether any job may preempt any other, as of
// the last pass and the placements since. preempt/tiresias answers Slurm's
// "is preemption enabled" with it, so that while it is false Slurm neither
// looks for victims nor tests jobs against busy nodes. A job that started
// after the last pass counts as running from the next pass on, so it may
// become a victim up to one pass interval later than it could otherwise.
func (c *Core) PreemptionPossible() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.preemption.view.possible()
}

// Preemptable reports whether preemptor may requeue preemptee, by
// priority.Preemption.Decide, the rule the simulator measures: an
// opportunistic job preempts nothing and is the first victim of any
// guaranteed one (policy/priority/opportunistic.go); between guaranteed jobs, the victim
// must sit Preemption.QueueGap queues below the preemptor, in a partition
// of no higher PriorityTier, not be a task of the preemptor's own job
// array, have run at least min_run seconds in its current run, not have
// spent its budget of preemptions, and the preemptor must not hold its
// queue by a starvation promotion (unless promoted_preempts). Only GPU
// jobs preempt and are preempted: a CPU-only job never requeues a GPU job
// to get CPUs (a new one has no attained service yet, so it would
// otherwise always win; its service in GPU-equivalents, snapshot.go,
// ranks it but frees no GPU). Both jobs must be known from the last pass
// or a placement since (slurmctld places every job at submit, so a new
// job counts in queue 0 at once); an unknown job neither preempts nor is
// preempted.
//
// A yes is remembered as the reason the victim may be requeued: the pass
// that finds it pending again logs it (observe). A no from min_run, the
// budget or the queue gap is remembered for the preemptor (blocked.go).
// Slurm asks this for every running job each time it tries a waiting one,
// under its locks: the cost is a few map lookups.
func (c *Core) Preemptable(preemptor, preemptee uint32) bool {
	c.mu.Lock()
	now := c.clock()
	defer c.mu.Unlock()
	pt, ok := c.preemption.view.gpu[preemptor]
	if !ok {
		return false
	}
	vt, ok := c.preemption.view.gpu[preemptee]
	if !ok {
		return false
	}
	victim, ok := c.decisions[preemptee]
	if !ok {
		return false
	}
	p := c.candidate(preemptor, c.decisions[preemptor].Queue, now)
	p.Tier, p.Array, p.Opportunistic = pt.tier, pt.array, pt.opportunistic
	v := c.candidate(preemptee, victim.Queue, now)
	v.Tier, v.Array, v.Opportunistic = vt.tier, vt.array, vt.opportunistic
	var verdict priority.Verdict
	switch {
	case pt.quota == priority.QuotaWithin && vt.quota == priority.QuotaBorrowing && pt.account != vt.account:
		// A reclaim: the pass chooses its victims, within
		// quota.max_reclaim_per_pass, and requeues them (quota.go);
		// Slurm's victim search would take as many as fit.
		return c.met.preemption(false)
	case pt.quota != priority.QuotaOff && vt.quota != priority.QuotaOff:
		verdict = c.cfg.Tiresias.Preemption.DecideQuota(
			priority.QuotaCandidate{Candidate: p, Account: pt.account, Quota: pt.quota},
			priority.QuotaCandidate{Candidate: v, Account: vt.account, Quota: vt.quota})
	default:
		verdict = c.cfg.Tiresias.Preemption.Decide(p, v)
	}
	switch verdict {
	case priority.Allowed:
		if c.preemption.notes == nil {
			c.preemption.notes = make(map[uint32]preemptNote)
		}
		c.preemption.notes[preemptee] = preemptNote{by: preemptor, byQueue: p.Queue, queue: v.Queue, ran: v.RunSeconds}
		c.preemption.blocked.allowed(preemptor, now)
	case priority.DeniedMinRun, priority.DeniedBudget, priority.DeniedQueueGap:
		c.preemption.blocked.note(preemptor, preemptee, verdict, p, v, now)
	}
	return c.met.preemption(verdict == priority.Allowed)
}

// VictimOrder is where running job id comes in the order Slurm takes
// victims, lowest first: preempt/tiresias answers Slurm's PREEMPT_DATA_PRIO
// with it, and Slurm requeues candidates in that order until the preemptor
// fits. The order is priority.Preemption.CompareVictims over the GPU jobs
// running at the last pass (with spread_victims, the less-requeued jobs of
// a queue go first). A job not running then (started since) gets
// math.MaxUint32 and goes last; min_run keeps such a young run anyway.
func (c *Core) VictimOrder(id uint32) uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.preemption.view.victimOrder[id]; ok {
		return n
	}
	return math.MaxUint32
}

// candidate describes job id for the preemption rule at now.
func (c *Core) candidate(id uint32, queue int, now int64) priority.Candidate {
	rec, ok := c.records[id]
	if !ok {
		return priority.Candidate{Queue: queue}
	}
	ran := 0.0
	if rec.RunOpen {
		ran = float64(max(0, now-rec.RunStart))
	}
	return rec.Candidate(queue, ran)
}

// preemptNote is why the core last let a job be preempted.
type preemptNote struct {
	by             uint32
	byQueue, queue int
	ran            float64
}

// reason is the note as a line for the log and the ledger.
func (n preemptNote) reason() string {
	return fmt.Sprintf("preempted by job %d (queue %d) from queue %d after a %.0f s run", n.by, n.byQueue, n.queue, n.ran)
}

// Preempting tells the core that Slurm is preempting job id at now:
// preempt/tiresias calls it when Slurm asks the victim's grace time, which
// it does once per preemption, for the victim alone, just before it
// requeues (or, for a job that may not be requeued, kills) it. The core
// keeps the time and the reason its rule gave, and the pass that finds
// the job pending or finished again ends its run there and counts the
// preemption (observe). Memory only: it runs under slurmctld's locks.
func (c *Core) Preempting(id uint32, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.preemption.events == nil {
		c.preemption.events = make(map[uint32]preemptEvent)
	}
	ev := preemptEvent{at: now}
	if n, ok := c.preemption.notes[id]; ok {
		ev.note, ev.noted = n, true
		delete(c.preemption.notes, id)
	}
	c.preemption.events[id] = ev
}

// preemptEvent is a preemption Slurm carried out (Preempting).
type preemptEvent struct {
	at    int64
	note  preemptNote
	noted bool // note holds the rule's reason
}

// forgetPreemptions drops what the core knows of preemptions of jobs that
// are gone. Called by the pass's forget stage.
func (c *Core) forgetPreemptions() {
	for id := range c.preemption.events {
		if !c.seen[id] {
			delete(c.preemption.events, id)
		}
	}
	for id := range c.preemption.notes {
		if !c.seen[id] {
			delete(c.preemption.notes, id)
		}
	}
}
