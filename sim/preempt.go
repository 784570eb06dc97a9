package sim

import (
	"cmp"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// victimPlan is the cheapest way found to make room on one node: of the
// node's candidates (lowest-ranked first), those marked in spared keep
// running and the other victims are preempted.
type victimPlan struct {
	node    int
	victims int
	spared  []bool
}

// planPreemption looks for running jobs to preempt so that j can start.
// eligible says which running jobs may be preempted for j. It prefers
// plans that preempt fewer jobs, and on a node it preempts the
// lowest-ranked jobs first. It returns the victims appended to out.
//
// Within a pass, a node's room (free GPUs plus GPUs of jobs that may still
// be preempted) never grows: starting a job takes GPUs, the walk's
// preemptible suffix only shrinks, and a preemption hands the victim's GPUs
// to the job it was made for. So once no node has room for g GPUs (or no
// n nodes can be emptied), no later job of the pass that needs as much will
// find it either; c.noRoom and c.noWhole remember that and skip the search.
func (c *cluster) planPreemption(j *JobState, eligible func(*JobState) bool, out []*JobState) ([]*JobState, bool) {
	gpus, per := j.Job.GPUs, c.perNode()
	if gpus <= per {
		if gpus >= c.noRoom {
			return out, false
		}
		p, ok, anyRoom := c.cheapestNode(j, gpus, eligible, func(int) bool { return true })
		if !anyRoom {
			c.noRoom = gpus
		}
		if !ok {
			return out, false
		}
		return c.appendVictims(out, p, eligible), true
	}
	if gpus/per >= c.noWhole {
		return out, false
	}

	// Whole nodes first: a node can be emptied only if everything on it may
	// be preempted; cheapest (fewest victims), then lowest index.
	type whole struct{ node, cost int }
	var wholes []whole
	for n := range c.free {
		if (c.frozen != nil && c.frozen[n] > 0) || c.isReserved(n) {
			// GPUs idle until the next pass: the node cannot be emptied
			// in this one, whatever is preempted.
			continue
		}
		cost, ok := 0, true
		for _, v := range c.jobsOn[n] {
			if !eligible(v) {
				ok = false
				break
			}
			cost++
		}
		if ok {
			wholes = append(wholes, whole{n, cost})
		}
	}
	need := gpus / per
	if len(wholes) < need {
		c.noWhole = min(c.noWhole, need)
		return out, false
	}
	slices.SortStableFunc(wholes, func(a, b whole) int { return cmp.Compare(a.cost, b.cost) })
	chosen := wholes[:need]
	start := len(out)
	for _, w := range chosen {
		out = append(out, c.jobsOn[w.node]...)
	}
	if rest := gpus % per; rest > 0 {
		isChosen := func(n int) bool {
			return slices.ContainsFunc(chosen, func(w whole) bool { return w.node == n })
		}
		p, ok, _ := c.cheapestNode(j, rest, eligible, func(n int) bool { return !isChosen(n) })
		if !ok {
			return out[:start], false
		}
		out = c.appendVictims(out, p, eligible)
	}
	// A job spanning several chosen nodes is listed once per node.
	victims := out[start:]
	slices.SortFunc(victims, func(a, b *JobState) int { return cmp.Compare(a.pos, b.pos) })
	victims = slices.Compact(victims)
	return out[:start+len(victims)], true
}

// cheapestNode finds the node (accepted by ok) where preempting the fewest
// eligible jobs lets gpus GPUs of j fit. On a node it takes victims
// lowest-ranked first until j fits, then spares each victim, best-ranked
// first, that j does not need after all: without that second step a large
// low-ranked victim taken first could be preempted for nothing.
// anyRoom reports whether some node had the GPUs at all.
func (c *cluster) cheapestNode(j *JobState, gpus int, eligible func(*JobState) bool, ok func(int) bool) (plan victimPlan, found, anyRoom bool) {
	best := victimPlan{victims: math.MaxInt}
	for n := range c.free {
		if !ok(n) || c.isReserved(n) {
			continue
		}
		room := c.free[n].GPUs
		for _, v := range c.jobsOn[n] {
			if eligible(v) {
				room += int(v.slotOn(n).gpus)
			}
		}
		if room < gpus {
			continue
		}
		anyRoom = true
		cands := c.candidates(n, eligible)
		c.spared = slices.Grow(c.spared[:0], len(cands))[:len(cands)]
		for i := range c.spared {
			c.spared[i] = true
		}
		taken := 0
		for taken < len(cands) && !c.fitsWithout(j, n, gpus, cands) {
			c.spared[taken] = false
			taken++
		}
		if !c.fitsWithout(j, n, gpus, cands) {
			continue
		}
		victims := taken
		for i := taken - 1; i >= 0; i-- {
			c.spared[i] = true
			if c.fitsWithout(j, n, gpus, cands) {
				victims--
			} else {
				c.spared[i] = false
			}
		}
		if victims < best.victims {
			best = victimPlan{node: n, victims: victims, spared: append(best.spared[:0], c.spared...)}
			if victims == 0 {
				break
			}
		}
	}
	return best, best.victims != math.MaxInt, anyRoom
}

// newPass forgets what the previous pass learnt about room for preemption.
func (c *cluster) newPass() {
	c.noRoom, c.noWhole = math.MaxInt, math.MaxInt
	clear(c.reserved)
}

// fitsWithout says whether gpus GPUs of j fit on node n once the
// candidates not marked in c.spared are gone.
func (c *cluster) fitsWithout(j *JobState, n, gpus int, cands []*JobState) bool {
	f := c.free[n]
	for i, v := range cands {
		if !c.spared[i] {
			s := v.slotOn(n)
			f = sensitivity.Resources{GPUs: f.GPUs + int(s.gpus), CPUs: f.CPUs + int(s.cpus), MemGB: f.MemGB + s.memGB}
		}
	}
	_, _, fits := c.grant(j, n, f, gpus)
	return fits
}

// appendVictims appends the jobs a plan preempts.
func (c *cluster) appendVictims(out []*JobState, p victimPlan, eligible func(*JobState) bool) []*JobState {
	for i, v := range c.candidates(p.node, eligible) {
		if !p.spared[i] {
			out = append(out, v)
		}
	}
	return out
}

// candidates lists the eligible jobs on node n in the order they are
// preempted: the policy's victim order, else lowest-ranked first. The
// slice is scratch, valid until the next call.
func (c *cluster) candidates(n int, eligible func(*JobState) bool) []*JobState {
	c.cands = c.cands[:0]
	for _, v := range c.jobsOn[n] {
		if eligible(v) {
			c.cands = append(c.cands, v)
		}
	}
	slices.SortFunc(c.cands, c.victimOrder)
	return c.cands
}

// lowestRankedFirst is the victim order of policies that set none.
func lowestRankedFirst(a, b *JobState) int { return cmp.Compare(b.pos, a.pos) }

// slotOn is the job's share of node n.
func (j *JobState) slotOn(n int) slot {
	for _, s := range j.slots {
		if int(s.node) == n {
			return s
		}
	}
	return slot{}
}
