package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// pass runs the policy once at now: order every active job, then start
// pending jobs greedily in that order, preempting where the policy allows.
// It returns the time of the next change the policy must act on.
func (e *engine) pass(now float64) float64 {
	e.passes++
	e.cluster.thaw()
	if e.sharingOn() {
		e.sharePrePass(now)
	}
	e.active = slices.DeleteFunc(e.active, func(j *JobState) bool { return j.Status == Done })
	if len(e.active) == 0 {
		next := e.policy.Order.NextChange(now, nil)
		if e.sharingOn() {
			e.order = e.order[:0]
			next = min(next, e.sharePostPass(now))
		}
		return next
	}
	n := len(e.active)
	e.order = append(e.order[:0], e.active...)
	e.levels = slices.Grow(e.levels[:0], n)[:n]
	e.policy.Order.Order(now, e.order, e.levels)
	for i, j := range e.order {
		j.pos = int32(i)
	}
	e.blocked = false
	if e.pending > 0 || e.oppsInOrder() {
		e.place(now)
	}
	next := e.policy.Order.NextChange(now, e.order)
	for _, j := range e.order {
		// A requeued job Slurm still holds needs a pass once it may start.
		if j.Status == Pending && j.eligibleAt > now {
			next = min(next, j.eligibleAt)
		}
		// A job start-time sizing holds back may be lowered once its wait
		// ends (synergy.Config.Waits).
		if j.Status == Pending && j.held {
			if end := j.heldSince + e.cfg.FallbackAfter; end > now {
				next = min(next, end)
			}
		}
	}
	if e.sharingOn() {
		next = min(next, e.sharePostPass(now))
	}
	if e.blocked {
		// Jobs the main scheduler did not reach start from backfill.
		next = min(next, e.nextBackfillCycle(now))
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
	c.now = now
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
	// Slurm's two schedulers (Config.BackfillInterval): the walk is the
	// main scheduler's until the first job that can neither start nor
	// preempt, where it stops; on a backfill cycle, backfill's walk goes
	// on from there.
	twoSchedulers := e.cfg.BackfillInterval > 0
	backfillCycle, backfill := twoSchedulers && e.onBackfillCycle(now), false
	var preemptor *JobState
	eligible := func(v *JobState) bool {
		return v.Status == Running && !v.opp && int(v.pos) >= k &&
			(pol.Victim == nil || pol.Victim(preemptor, v, now))
	}
	for i, j := range order {
		if j.Status != Pending || j.preemptedIn == pass || j.eligibleAt > now {
			continue
		}
		preemptor = j
		if c.couldFit(j.Job.GPUs) {
			c.heldBack = false
			if speed, ok := c.placeFree(j); ok {
				e.start(j, speed, now)
				if j.opp {
					e.sh.oppGPUs += j.Job.GPUs
				}
				continue
			}
			if c.heldBack && !j.held { // the pass's clock starts (core.Fallback)
				j.held, j.heldSince = true, now
			}
		}
		// An opportunistic job in the order (sharing.go) takes only what
		// is idle: it preempts and evicts nothing.
		if !j.opp && e.oppHeld() > 0 && c.freeGPUs+e.oppHeld() >= j.Job.GPUs && e.evictFor(j, now) {
			continue
		}
		if pol.Preemptive && !j.opp {
			for k < n && (k <= i || (!pol.PreemptRankedBelow && !pol.preempts(levels[i], levels[k]))) {
				if order[k].preemptedIn == pass {
					preemptedBeyond -= order[k].Job.GPUs
				}
				k++
			}
			reachable := e.suffix[k] - preemptedBeyond
			// A backfill cycle's preemptor starts at a later pass, once
			// Slurm has requeued its victims; meanwhile their nodes are
			// held for it (cluster.reserved).
			if reachable+c.freeGPUs >= j.Job.GPUs && e.preemptFor(j, eligible, now, !backfill) {
				for _, v := range e.victims {
					preemptedBeyond += v.Job.GPUs
				}
				if backfill {
					c.reserve(c.plan)
				}
				continue
			}
			if c.freeGPUs+e.oppHeld() == 0 && reachable == 0 {
				return
			}
		}
		if pol.HeadOfLine || (!pol.Preemptive && c.freeGPUs+e.oppHeld() == 0) {
			return
		}
		if twoSchedulers && !backfill {
			e.blocked = true // the rest waits for a backfill cycle
			if !backfillCycle {
				return
			}
			backfill = true
		}
	}
}

// onBackfillCycle says whether a pass at now is one of sched/backfill's
// cycles (Config.BackfillInterval), which run at its multiples.
func (e *engine) onBackfillCycle(now float64) bool {
	iv := e.cfg.BackfillInterval
	k := math.Round(now / iv)
	return math.Abs(now-k*iv) < 1e-9
}

// nextBackfillCycle is the first backfill cycle strictly after now.
func (e *engine) nextBackfillCycle(now float64) float64 {
	iv := e.cfg.BackfillInterval
	return (math.Floor(now/iv+1e-9) + 1) * iv
}

// preemptFor requeues the running jobs a plan names and, with start,
// starts j in the room they leave (c.plan is its placement either way).
func (e *engine) preemptFor(j *JobState, eligible func(*JobState) bool, now float64, start bool) bool {
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
	if start {
		e.start(j, speed, now)
	}
	if e.cfg.PartialNodeIdle {
		c.freezeLeftover()
	}
	return true
}

// evictFor takes back GPUs that opportunistic jobs hold alone for the
// guaranteed job j, in any policy (they are every job's first victims),
// before the policy's own preemption is considered; it returns whether j
// started. Under the strict rule any of them goes, in the policy's victim
// order; by default only those at a worse level of the policy's order
// than j (under las and gittins in a worse Tiresias queue,
// priority.Preemption.Decide's rule, none of the policy's shields
// applying; under the non-preemptive orders, which set no levels, ranked
// below j), the one whose run has lasted least first (the least work
// thrown away, priority.Preemption.CompareVictims). Evicting one of j's
// own queue too evicted each opportunistic job 1.7 times on average
// under 2D-Gittins (docs/evaluation section 8): a job that had just
// started for lack of anything better ranked was evicted by the next
// arrival of the same queue, again and again.
func (e *engine) evictFor(j *JobState, now float64) bool {
	c := e.cluster
	// planPreemption remembers within a pass where the policy's victims
	// cannot make room; this search has other victims, so it must neither
	// use nor change that memory.
	noRoom, noWhole := c.noRoom, c.noWhole
	c.noRoom, c.noWhole = math.MaxInt, math.MaxInt
	// A guest of several GPUs that holds idle GPUs beside its shares is
	// taken back like one on GPUs alone; its hosts run alone again.
	onGPUs := func(v *JobState) bool { return v.Status == Running && v.opp && (v.host == nil || len(v.slots) > 0) }
	eligible := onGPUs
	order := c.victimOrder
	if !e.sh.cfg.Rules.StrictOpportunistic {
		// The preemptive policies' levels (Tiresias's queues) are what the
		// policy's own preemption compares; the others set none, and
		// their order is the rank.
		ranked := func(v *JobState) bool { return v.pos > j.pos }
		if e.policy.Preemptive {
			level := e.levels[j.pos]
			ranked = func(v *JobState) bool { return e.levels[v.pos] > level }
		}
		eligible = func(v *JobState) bool { return onGPUs(v) && ranked(v) }
		c.victimOrder = e.sh.leastRunFirst
	}
	ok := e.preemptFor(j, eligible, now, true)
	c.victimOrder = order
	c.noRoom, c.noWhole = noRoom, noWhole
	if ok {
		e.sh.sum.Evicted += len(e.victims)
		for _, v := range e.victims {
			if v.host != nil {
				e.unpairOthers(v, nil, now)
			}
		}
	}
	return ok
}

// oppVictim describes opportunistic job j, running at now, for the
// order of opportunistic victims (priority.Preemption.CompareVictims):
// how long its run has lasted and its rank in the pass. Its queue is
// left out: evictFor has chosen which of them may go, and of those the
// rule takes the least run first, then the lowest ranked.
func (j *JobState) oppVictim(now float64) priority.Victim {
	return priority.Victim{Opportunistic: true, RunSeconds: now - j.RunStart, Rank: int(j.pos)}
}

// oppsInOrder says whether opportunistic jobs stand in the policy's order
// (sharing on, not under the strict rule): a pass then places even when
// no guaranteed job waits.
func (e *engine) oppsInOrder() bool {
	return e.sharingOn() && !e.sh.cfg.Rules.StrictOpportunistic && len(e.sh.opps) > 0
}
