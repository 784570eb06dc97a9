package core

import (
	"fmt"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"

	"github.com/lachesis-sched/lachesis/priority"
)

// preemptView is what the core knows about preemption between passes, kept
// so that preempt/tiresias can tell Slurm cheaply that nobody can preempt
// anybody. With preemption enabled, Slurm's schedulers ask, for every
// waiting job they try, which running jobs it could requeue, and the select
// plugin then tests the job again with those jobs removed: that work is
// wasted for a job that can preempt nobody. Guarded by Core.mu.
type preemptView struct {
	// worstRunning is the highest (worst) queue among GPU jobs running at
	// the last pass; -1 when none ran.
	worstRunning int
	// bestPending is the lowest (best) queue among pending GPU jobs of
	// the last pass and those placed since; math.MaxInt when none.
	bestPending int
	// gpu holds the jobs that use GPUs (last pass, and placements since).
	gpu map[uint32]bool
	// victimOrder numbers the GPU jobs running at the last pass in the
	// order Slurm is to take them as victims, from 1 (first taken), by
	// priority.Preemption.CompareVictims: the order the simulator's
	// preemption uses. floor and running are its scratch.
	victimOrder map[uint32]uint32
	floor       priority.RequeueFloor
	running     []victimEntry
}

// victimEntry is one running GPU job while the victim order is built.
type victimEntry struct {
	id uint32
	priority.Victim
}

// orderVictims numbers the running GPU jobs of a pass (results[k] is the
// decision for jobs[k]) by rule's victim order; requeues gives a job's
// requeues so far.
func (v *preemptView) orderVictims(rule priority.Preemption, jobs []priority.Job, results []priority.Result, requeues func(id uint32) int) {
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
		e := victimEntry{id: j.ID, Victim: priority.Victim{Queue: results[k].Queue, Requeues: requeues(j.ID), Rank: results[k].Rank}}
		v.floor.Add(e.Queue, e.Requeues)
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
// decision for jobs[k]).
func (v *preemptView) fromPass(jobs []priority.Job, results []priority.Result) {
	if v.gpu == nil {
		v.gpu = make(map[uint32]bool, len(jobs))
	}
	clear(v.gpu)
	v.worstRunning, v.bestPending = -1, math.MaxInt
	for k := range results {
		j := &jobs[k]
		if j.GPUs == 0 {
			continue
		}
		v.gpu[j.ID] = true
		q := results[k].Queue
		if j.State == priority.Running {
			v.worstRunning = max(v.worstRunning, q)
		} else {
			v.bestPending = min(v.bestPending, q)
		}
	}
}

// placed notes a job placed between passes (submitted, requeued, released):
// it waits in queue, and until the next pass it is the view's only source
// for the job's GPUs.
func (v *preemptView) placed(s *Snapshot, queue int) {
	if s.gpuCount() == 0 {
		return
	}
	if v.gpu == nil {
		v.gpu = make(map[uint32]bool)
		v.worstRunning = -1
	}
	v.gpu[s.ID] = true
	v.bestPending = min(v.bestPending, queue)
}

// possible reports whether some waiting GPU job sits in a better queue than
// some running GPU job: otherwise no job can preempt any other.
func (v *preemptView) possible() bool {
	return v.gpu != nil && v.bestPending < v.worstRunning
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
	return c.preempt.possible()
}

// Preemptable reports whether preemptor may requeue preemptee, by
// priority.Preemption.Decide, the rule the simulator measures: the victim
// must sit Preemption.QueueGap queues below the preemptor, have run at
// least min_run seconds in its current run, not have spent its budget of
// requeues, and the preemptor must not hold its queue by a starvation
// promotion (unless promoted_preempts). Only GPU jobs preempt and are
// preempted: a CPU-only job never requeues a GPU job to get CPUs (a new
// one has no attained service yet, so it would otherwise always win; its
// service in GPU-equivalents, snapshot.go, ranks it but frees no GPU).
// Both jobs must be known from the last pass or a placement since
// (slurmctld places every job at submit, so a new job counts in queue 0 at
// once); an unknown job neither preempts nor is preempted.
//
// A yes is remembered as the reason the victim may be requeued: the pass
// that finds it pending again logs it (observe).
func (c *Core) Preemptable(preemptor, preemptee uint32) bool {
	c.mu.Lock()
	now := c.clock()
	defer c.mu.Unlock()
	if !c.preempt.gpu[preemptor] || !c.preempt.gpu[preemptee] {
		return false
	}
	victim, ok := c.decisions[preemptee]
	if !ok {
		return false
	}
	p := c.candidate(preemptor, c.decisions[preemptor].Queue, now)
	v := c.candidate(preemptee, victim.Queue, now)
	verdict := c.cfg.Tiresias.Preemption.Decide(p, v)
	if verdict == priority.Allowed {
		if c.preemptNotes == nil {
			c.preemptNotes = make(map[uint32]preemptNote)
		}
		c.preemptNotes[preemptee] = preemptNote{by: preemptor, byQueue: p.Queue, queue: v.Queue, ran: v.RunSeconds}
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
	if n, ok := c.preempt.victimOrder[id]; ok {
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

// noteRequeue logs a running job found pending again, with the reason the
// core gave Slurm if it let the job be preempted, and keeps that reason in
// its ledger record. Called under c.mu.
func (c *Core) noteRequeue(rec *ledger.Record) {
	n, ok := c.preemptNotes[rec.JobID]
	if !ok {
		c.log.Info("job requeued, not by a Lachesis preemption", keyJob, rec.JobID, keyRequeues, rec.Requeues()+1)
		return
	}
	delete(c.preemptNotes, rec.JobID)
	rec.PreemptReason = n.reason()
	c.log.Info("job preempted", keyJob, rec.JobID, keyPreemptor, n.by, keyPreemptorQueue, n.byQueue,
		keyQueue, n.queue, keyRan, n.ran, keyRequeues, rec.Requeues()+1, keyReason, rec.PreemptReason)
}
