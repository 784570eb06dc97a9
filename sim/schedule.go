package sim

import (
	"fmt"
	"slices"
)

// pass runs the policy once at now: order every active job, then start
// pending jobs greedily in that order, preempting where the policy allows.
// It returns the time of the next change the policy must act on.
func (e *engine) pass(now float64) float64 {
	e.passes++
	e.cluster.thaw()
	e.active = slices.DeleteFunc(e.active, func(j *JobState) bool { return j.Status == Done })
	if len(e.active) == 0 {
		return e.policy.Order.NextChange(now, nil)
	}
	n := len(e.active)
	e.order = append(e.order[:0], e.active...)
	e.levels = slices.Grow(e.levels[:0], n)[:n]
	e.policy.Order.Order(now, e.order, e.levels)
	for i, j := range e.order {
		j.pos = int32(i)
	}
	if e.pending > 0 {
		e.cluster.now = now
		e.place(now)
	}
	next := e.policy.Order.NextChange(now, e.order)
	fallback := e.cluster.fallbackAfter > 0 && e.cluster.mode == AllocStart
	for _, j := range e.order {
		// A requeued job Slurm still holds needs a pass once it may start.
		if j.Status == Pending && j.eligibleAt > now {
			next = min(next, j.eligibleAt)
		}
		// So does a sized job once a pass may lower it.
		if fallback && j.Status == Pending && j.Profile != nil {
			if at := j.waitedSince() + e.cluster.fallbackAfter; at > now {
				next = min(next, at)
			}
		}
	}
	if e.cluster.frozenGPUs > 0 {
		// GPUs left idle by a preemption are Slurm's again at its next pass.
		next = min(next, now)
	}
	return next
}

// place is the greedy walk of one pass.
//
// For preemptive policies the jobs a pending job may preempt are the
// running jobs of a strictly larger level; levels do not decrease along the
// order, so they form a suffix of it that starts at k and only shrinks as
// the walk goes on. suffix[p] counts the GPUs that were running at
// positions ≥ p when the pass began; what was preempted since is
// subtracted, so whether preempting could free enough GPUs is known in
// O(1) before any node is looked at.
func (e *engine) place(now float64) {
	order, levels := e.order, e.levels
	pol, c := e.policy, e.cluster
	pass := e.passes
	n := len(order)
	k, preemptedBeyond := 0, 0
	c.newPass()
	if pol.Preemptive {
		e.suffix = slices.Grow(e.suffix[:0], n+1)[:n+1]
		e.suffix[n] = 0
		for p := n - 1; p >= 0; p-- {
			e.suffix[p] = e.suffix[p+1]
			if order[p].Status == Running {
				e.suffix[p] += order[p].Job.GPUs
			}
			if p+1 < n && levels[p] > levels[p+1] {
				panic(fmt.Sprintf("sim: policy %s: levels decrease along the order at %d", pol.Name, p))
			}
		}
	}
	var preemptor *JobState
	eligible := func(v *JobState) bool {
		return v.Status == Running && int(v.pos) >= k &&
			(pol.Victim == nil || pol.Victim(preemptor, v, now))
	}
	for i, j := range order {
		if j.Status != Pending || j.preemptedIn == pass || j.eligibleAt > now {
			continue
		}
		preemptor = j
		if c.couldFit(j.Job.GPUs) {
			if speed, ok := c.placeFree(j); ok {
				e.start(j, speed, now)
				continue
			}
		}
		if pol.Preemptive {
			for k < n && (k <= i || (!pol.PreemptRankedBelow && !pol.preempts(levels[i], levels[k]))) {
				if order[k].preemptedIn == pass {
					preemptedBeyond -= order[k].Job.GPUs
				}
				k++
			}
			reachable := e.suffix[k] - preemptedBeyond
			if reachable+c.freeGPUs >= j.Job.GPUs && e.preemptFor(j, eligible, now) {
				for _, v := range e.victims {
					preemptedBeyond += v.Job.GPUs
				}
				continue
			}
			if c.freeGPUs == 0 && reachable == 0 {
				return
			}
		}
		if pol.HeadOfLine || (!pol.Preemptive && c.freeGPUs == 0) {
			return
		}
	}
}

// preemptFor requeues the running jobs a plan names and starts j in the
// room they leave.
func (e *engine) preemptFor(j *JobState, eligible func(*JobState) bool, now float64) bool {
	var ok bool
	e.victims, ok = e.cluster.planVictims(j, eligible, e.victims[:0])
	if !ok {
		return false
	}
	c := e.cluster
	c.nodesFreed = c.nodesFreed[:0]
	for _, v := range e.victims {
		for _, s := range v.slots {
			c.nodesFreed = append(c.nodesFreed, nodeGPUs{node: s.node, gpus: s.gpus})
		}
		e.preempt(v, now)
	}
	speed, ok := c.placeFree(j)
	if !ok {
		panic(fmt.Sprintf("sim: job %d does not fit after preempting %d jobs for it", j.Job.ID, len(e.victims)))
	}
	e.start(j, speed, now)
	if e.cfg.PartialNodeIdle {
		c.freezeLeftover()
	}
	return true
}
