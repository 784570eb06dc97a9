package core

import (
	"math"

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

// Preemptable reports whether preemptor may requeue preemptee. Tiresias
// preempts only across queue boundaries: the victim must sit in a lower
// queue than the job that wants its GPUs. Only GPU jobs preempt and are
// preempted: a CPU-only job never requeues a GPU job to get CPUs (a new one
// has no attained service yet, so it would otherwise always win; its
// service in GPU-equivalents, snapshot.go, ranks it but frees no GPU). Both
// jobs must be known from the last pass or a placement since (slurmctld
// places every job at submit, so a new job counts in queue 0 at once); an
// unknown job neither preempts nor is preempted.
func (c *Core) Preemptable(preemptor, preemptee uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.preempt.gpu[preemptor] || !c.preempt.gpu[preemptee] {
		return false
	}
	victim, ok := c.decisions[preemptee]
	if !ok {
		return false
	}
	return c.met.preemption(priority.Preempts(c.decisions[preemptor].Queue, victim.Queue))
}
