package sim

import (
	"math"
	"slices"
	"time"

	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// AllocMode chooses how CPUs and memory are given to a job.
type AllocMode string

const (
	// AllocProportional gives every job its GPUs' fraction of the node's
	// CPUs and memory.
	AllocProportional AllocMode = "proportional"
	// AllocSynergy gives profiled jobs their best-case demand where the
	// node can spare it (profiler/sensitivity's Allocator).
	AllocSynergy AllocMode = "synergy"
	// AllocStart is what slurmctld does with job_submit/synergy and the
	// pass's start-time sizing: a profiled job asks for its best case; it
	// starts with it wherever that is free, and if it is free nowhere while
	// a node has the job's GPUs, it is held back while start-time sizing
	// waits for its request (synergy.Config.Waits), then lowered to what a
	// node can spare (synergy.FitOnNode): the rules the core applies. A
	// requeued job starts again from its best case (synergy.Restore).
	// slurmctld acts at its next pass, the simulator at the moment the
	// wait ends.
	AllocStart AllocMode = "start"
)

// cluster is the nodes' free resources and who runs where.
//
// Placement is consolidated: a job of G ≤ GPUs-per-node GPUs goes on one
// node, the one where it runs fastest (Synergy mode), then the fullest that
// fits (best fit, which keeps whole nodes free for large jobs), then the
// lowest index. A larger job takes ⌊G/n⌋ whole free nodes (lowest index
// first) plus, for the rest, one more node chosen like a small job.
type cluster struct {
	shape Shape
	alloc sensitivity.Allocator
	mode  AllocMode
	free  []sensitivity.Resources
	// byFree[k] is how many nodes have exactly k free GPUs, to reject a job
	// that cannot fit without scanning the nodes.
	byFree   []int
	jobsOn   [][]*JobState
	freeGPUs int
	// scratch for placement and preemption
	plan   []slot
	cands  []*JobState
	spared []bool
	// noRoom and noWhole: within this pass, no preemption can make room for
	// a single-node job of noRoom or more GPUs, nor empty noWhole nodes
	// (see planPreemption).
	noRoom, noWhole int
	// het is the heterogeneous part, nil on a homogeneous cluster.
	het *hetCluster
	// frozen[n] GPUs of node n were freed by a preemption that did not
	// need them: Slurm gives them out only at its next pass (thaw).
	frozen     []int
	frozenGPUs int
	// reserved[n]: within this pass, node n is held for a job that
	// preempted there in a backfill cycle (Config.BackfillInterval):
	// nothing else starts or preempts on it until the next pass.
	reserved []bool
	// planning: a preemption is being planned. Start-time sizing lowers a
	// job only in the pass, on a node whose GPUs are free (synergy's
	// FitNow); Slurm preempts for the job's request as it stands, so a
	// preemptor is never lowered below a request an empty node holds.
	planning   bool
	nodesFreed []nodeGPUs // scratch: what the victims of one preemption held
	// victimOrder sorts preemption candidates, first preempted first
	// (Policy.VictimOrder, or lowestRankedFirst).
	victimOrder func(a, b *JobState) int
	// AllocStart's start-time sizing: its patience (sizing.FallbackAfter),
	// a node as Slurm configures it (nodeCap), the current pass's time, and
	// whether the last placement held a job back (heldBack).
	sizing   synergy.Config
	nodeCap  synergy.NodeState
	now      float64
	heldBack bool
}

type nodeGPUs struct{ node, gpus int32 }

// freezeLeftover takes out of service, until the next pass, the GPUs the
// last preemption freed (c.nodesFreed) that its preemptor did not take.
// Slurm requeues the victims and starts the preemptor once their GPUs are
// released; nothing else is placed in that room in the same pass, so a
// 2-GPU victim requeued for a 1-GPU job leaves a GPU idle until then.
func (c *cluster) freezeLeftover() {
	if c.frozen == nil {
		c.frozen = make([]int, len(c.free))
	}
	for _, f := range c.nodesFreed {
		n := int(f.node)
		idle := min(int(f.gpus), c.free[n].GPUs)
		if idle > 0 {
			c.adjust(n, -idle, 0, 0)
			c.frozen[n] += idle
			c.frozenGPUs += idle
		}
	}
}

// thaw puts frozen GPUs back in service at the start of a pass.
func (c *cluster) thaw() {
	if c.frozenGPUs == 0 {
		return
	}
	for n, g := range c.frozen {
		if g > 0 {
			c.adjust(n, g, 0, 0)
			c.frozen[n] = 0
		}
	}
	c.frozenGPUs = 0
}

func newCluster(shape Shape, mode AllocMode, reserve, fallbackAfter float64) *cluster {
	nodes, per := shape.Nodes, shape.GPUsPerNode
	if shape.GPUCountOnly {
		nodes, per = 1, shape.GPUs()
	}
	c := &cluster{
		shape:       shape,
		alloc:       sensitivity.Allocator{Node: shape.node(), Reserve: reserve},
		mode:        mode,
		free:        make([]sensitivity.Resources, nodes),
		byFree:      make([]int, per+1),
		jobsOn:      make([][]*JobState, nodes),
		freeGPUs:    nodes * per,
		victimOrder: lowestRankedFirst,
	}
	c.sizing.FallbackAfter = time.Duration(fallbackAfter * float64(time.Second))
	n := shape.node()
	c.nodeCap = synergy.NodeState{CPUs: n.CPUs, GPUs: n.GPUs, MemMB: mbOf(n.MemGB), Usable: true}
	for i := range c.free {
		c.free[i] = shape.node()
	}
	c.byFree[per] = nodes
	return c
}

func (c *cluster) perNode() int { return len(c.byFree) - 1 }

// couldFit says whether enough GPUs are free in the right shape, ignoring
// CPUs and memory.
func (c *cluster) couldFit(gpus int) bool {
	if c.het != nil {
		return c.het.couldFit(c, gpus)
	}
	per := c.perNode()
	if gpus > c.freeGPUs {
		return false
	}
	if gpus <= per {
		for k := gpus; k <= per; k++ {
			if c.byFree[k] > 0 {
				return true
			}
		}
		return false
	}
	whole, rest := gpus/per, gpus%per
	if c.byFree[per] < whole {
		return false
	}
	if rest == 0 || c.byFree[per] > whole {
		return true
	}
	for k := rest; k < per; k++ {
		if c.byFree[k] > 0 {
			return true
		}
	}
	return false
}

// grant is what a job would get of gpus GPUs on node n with the node's
// free resources f, and the speed it would run at there.
func (c *cluster) grant(j *JobState, n int, f sensitivity.Resources, gpus int) (slot, float64, bool) {
	if f.GPUs < gpus {
		return slot{}, 0, false
	}
	s := slot{node: int32(n), gpus: int32(gpus)}
	if c.shape.GPUCountOnly {
		return s, 1, true
	}
	var a sensitivity.Allocation
	if c.mode == AllocStart && j.Profile != nil {
		var ok bool
		if a, ok = c.fitOnNode(j, f, gpus); !ok {
			return slot{}, 0, false
		}
	} else if c.mode == AllocSynergy && j.Profile != nil {
		var ok bool
		if a, ok = c.alloc.TryAllocate(f, gpus, j.best); !ok {
			return slot{}, 0, false
		}
	} else {
		a = c.alloc.Proportional(gpus)
		if a.CPUs > f.CPUs || a.MemGB > f.MemGB+1e-9 {
			return slot{}, 0, false
		}
	}
	s.cpus, s.memGB = int32(a.CPUs), a.MemGB
	speed := 1.0
	if j.Profile != nil {
		speed = j.Profile.At(a.PerGPU())
	}
	return s, speed, speed > 0
}

// fitOnNode is AllocStart's allocation of gpus GPUs of j on a node with
// free resources f: synergy.FitOnNode on the node in MB (as slurmctld sees
// it), with the job sized to its best case and the node's share per GPU. A
// job that fits only lowered is refused (c.heldBack) while start-time
// sizing waits for its request.
func (c *cluster) fitOnNode(j *JobState, f sensitivity.Resources, gpus int) (sensitivity.Allocation, bool) {
	sz := c.startSizing(j)
	node := synergy.NodeState{CPUs: f.CPUs, GPUs: f.GPUs, MemMB: mbOf(f.MemGB), Usable: true}
	cpus, mem, fit := synergy.FitOnNode(sz, gpus, node)
	if fit == synergy.NoFit {
		return sensitivity.Allocation{}, false
	}
	// An empty node never holds a job back: a request it cannot hold
	// never waits (synergy.Config.Waits). So the preemption planner's
	// whole nodes, which it empties without asking grant, always take
	// their job.
	if fit == synergy.FitsLowered {
		held := 0.0
		if j.held && !c.planning {
			held = c.now - j.heldSince
		}
		if c.sizing.Waits(sz, gpus, c.nodeCap, time.Duration(held*float64(time.Second))) {
			c.heldBack = true
			return sensitivity.Allocation{}, false
		}
	}
	a := sensitivity.Allocation{GPUs: gpus, CPUs: gpus * cpus, MemGB: float64(uint64(gpus)*mem) / 1024}
	if fit == synergy.FitsLowered {
		a.Outcome = sensitivity.FellBack
	}
	return a, a.MemGB <= f.MemGB+1e-9
}

// startSizing is j's request under AllocStart at each start: its best
// case and the node's share per GPU. A job lowered for an earlier run is
// raised back before it starts again (synergy.Restore in the pass), so
// every start sizes from the best case.
func (c *cluster) startSizing(j *JobState) synergy.Sizing {
	share := c.alloc.Proportional(1)
	return synergy.Sizing{CPUs: j.best.CPUsPerGPU, MemMB: j.best.MemMB(),
		ShareCPUs: max(share.CPUs, 1), ShareMemMB: mbOf(share.MemGB)}
}

// mbOf is GB in whole MB (1024 per GB, as sensitivity.Demand.MemMB), rounded
// down: what is free is never overstated.
func mbOf(gb float64) uint64 { return uint64(math.Floor(max(gb, 0)*1024 + 1e-6)) }

// bestNode picks the node for gpus GPUs of j among nodes accepted by ok,
// with each node's free resources given by freeOf.
func (c *cluster) bestNode(j *JobState, gpus int, ok func(n int) bool, freeOf func(n int) sensitivity.Resources) (slot, float64, bool) {
	var best slot
	bestSpeed, bestFree, found := 0.0, math.MaxInt, false
	for n := range c.free {
		if !ok(n) || c.isReserved(n) {
			continue
		}
		f := freeOf(n)
		if f.GPUs < gpus {
			continue
		}
		s, speed, fits := c.grant(j, n, f, gpus)
		if !fits {
			continue
		}
		if speed > bestSpeed || (speed == bestSpeed && f.GPUs < bestFree) {
			best, bestSpeed, bestFree, found = s, speed, f.GPUs, true
		}
	}
	return best, bestSpeed, found
}

// placeFree finds a placement for j in the free resources as they are; it
// fills c.plan and returns the job's speed (the slowest node's).
func (c *cluster) placeFree(j *JobState) (float64, bool) {
	if c.het != nil {
		return c.het.placeFree(c, j)
	}
	gpus, per := j.Job.GPUs, c.perNode()
	c.plan = c.plan[:0]
	freeOf := func(n int) sensitivity.Resources { return c.free[n] }
	if gpus <= per {
		s, speed, ok := c.bestNode(j, gpus, func(int) bool { return true }, freeOf)
		if ok {
			c.plan = append(c.plan, s)
		}
		return speed, ok
	}
	speed := math.Inf(1)
	for n := range c.free {
		if len(c.plan) == gpus/per {
			break
		}
		if c.free[n].GPUs == per && !c.isReserved(n) {
			s, sp, ok := c.grant(j, n, c.free[n], per)
			if ok {
				c.plan = append(c.plan, s)
				speed = min(speed, sp)
			}
		}
	}
	if len(c.plan) < gpus/per {
		return 0, false
	}
	if rest := gpus % per; rest > 0 {
		s, sp, ok := c.bestNode(j, rest, c.notInPlan, freeOf)
		if !ok {
			return 0, false
		}
		c.plan = append(c.plan, s)
		speed = min(speed, sp)
	}
	return speed, true
}

// take commits c.plan to j.
func (c *cluster) take(j *JobState) {
	j.slots = append(j.slots[:0], c.plan...)
	for _, s := range j.slots {
		c.adjust(int(s.node), -int(s.gpus), -int(s.cpus), -s.memGB)
		c.jobsOn[s.node] = append(c.jobsOn[s.node], j)
	}
}

// release gives back everything j holds.
func (c *cluster) release(j *JobState) {
	for _, s := range j.slots {
		c.adjust(int(s.node), int(s.gpus), int(s.cpus), s.memGB)
		on := c.jobsOn[s.node]
		if i := slices.Index(on, j); i >= 0 {
			on[i] = on[len(on)-1]
			on[len(on)-1] = nil
			c.jobsOn[s.node] = on[:len(on)-1]
		}
	}
	j.slots = j.slots[:0]
}

func (c *cluster) adjust(n, gpus, cpus int, mem float64) {
	f := &c.free[n]
	c.byFree[f.GPUs]--
	f.GPUs += gpus
	f.CPUs += cpus
	f.MemGB += mem
	c.byFree[f.GPUs]++
	c.freeGPUs += gpus
	if f.GPUs < 0 || f.GPUs > c.perNode() || f.CPUs < 0 || f.MemGB < -1e-6 {
		panic("sim: node over-committed; this is a bug in the simulator")
	}
}

// isReserved says whether node n is held for a backfill preemptor in this
// pass (cluster.reserved).
func (c *cluster) isReserved(n int) bool { return c.reserved != nil && c.reserved[n] }

// reserve holds the nodes of a placement for the rest of the pass.
func (c *cluster) reserve(plan []slot) {
	if c.reserved == nil {
		c.reserved = make([]bool, len(c.free))
	}
	for _, s := range plan {
		c.reserved[s.node] = true
	}
}

func (c *cluster) notInPlan(n int) bool {
	return !slices.ContainsFunc(c.plan, func(s slot) bool { return int(s.node) == n })
}
