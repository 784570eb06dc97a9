// Package quotasim measures guaranteed GPU quotas in affinity cells
// (issue 35, item 4; HiveD's sharing safety): it replays a trace whose
// jobs carry an account (a Philly virtual cluster) on the shared cluster
// under one of four policies, and each account alone on a private cluster
// of its quota's cells, and reports per account the average queueing
// delay and JCT both ways, the accounts worse off than alone, the
// fragmentation (stranded GPUs while jobs wait) and the reclaimed work.
//
// The rules are the project's: cells and placement from policy/cells,
// quota classification and reclaim victims from policy/quota. The
// scheduling model is deliberately smaller than sim's (which models
// Slurm's passes, CPUs and memory, restart costs and Tiresias's
// preemption): here a pass every PassInterval seconds orders the waiting
// jobs by 2D-LAS queue (attained GPU-seconds against Thresholds), then
// submission, and starts every one that fits (backfill); the only
// preemption is a quota reclaim. So the four policies differ only in
// what this issue changes: who goes first, where a job is placed and
// what a reclaim evicts.
package quotasim

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/quota"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// Policy is what is compared.
type Policy string

const (
	// Defaults is today's Lachesis in this model: 2D-LAS order, best-fit
	// node placement, no quotas, no fair share.
	Defaults Policy = "defaults"
	// FairShare adds fair share between accounts (shares ∝ quotas, 7-day
	// half-life): inside a queue, accounts at or under their share first.
	FairShare Policy = "fairshare"
	// QuotaCount is quotas counted in GPUs without cells (KAI's deserved
	// quota): within-quota jobs first, borrowers after; best-fit placement;
	// a reclaim frees GPUs anywhere in the cluster.
	QuotaCount Policy = "quota"
	// QuotaCells is quotas in cells (HiveD): each account's cells bound
	// to it; its guaranteed jobs placed in its own cells, smallest wholly
	// free cell first; borrowers on unbound cells first; a reclaim frees
	// one of the owner's cells.
	QuotaCells Policy = "quota-cells"
)

// Policies lists them in report order.
var Policies = []Policy{Defaults, FairShare, QuotaCount, QuotaCells}

// ErrBadConfig is wrapped by every configuration error.
var ErrBadConfig = errors.New("bad quota simulation config")

// Config is one run.
type Config struct {
	Topology cells.Topology
	Quotas   map[string]quota.Spec
	Policy   Policy
	// PassInterval: seconds between scheduling passes.
	PassInterval float64
	// Thresholds: 2D-LAS queue boundaries in attained GPU-seconds.
	Thresholds []float64
	// MaxReclaimPerPass bounds the jobs one pass's reclaims evict.
	MaxReclaimPerPass int
	// CheckpointEvery: an evicted job restarts from its last checkpoint,
	// taken every this many seconds of its run (0: no checkpoints, it
	// restarts from the start of the run). The lost part is the reclaim's
	// work lost.
	CheckpointEvery float64
	// FairShareHalfLife: FairShare's usage decay, seconds.
	FairShareHalfLife float64
}

// DefaultConfig is the evaluation's setting on a topology.
func DefaultConfig(top cells.Topology) Config {
	return Config{
		Topology:          top,
		Policy:            QuotaCells,
		PassInterval:      60,
		Thresholds:        []float64{3250, 32500, 325000, 3250000},
		MaxReclaimPerPass: quota.DefaultMaxReclaimPerPass,
		CheckpointEvery:   1800,
		FairShareHalfLife: 7 * 24 * 3600,
	}
}

// JobResult is one job's outcome.
type JobResult struct {
	ID      uint32
	Account string
	GPUs    int
	Submit  float64
	Finish  float64
	// Duration is the job's own run time.
	Duration float64
	Evicted  int
}

// JCT and Queueing (JCT less its own run time: waiting and rework).
func (j JobResult) JCT() float64      { return j.Finish - j.Submit }
func (j JobResult) Queueing() float64 { return j.JCT() - j.Duration }

// Result is one run's outcome.
type Result struct {
	Policy Policy
	Jobs   []JobResult
	// Unrunnable: jobs larger than the cluster, left out.
	Unrunnable int
	// Fragmentation is the time-average share of the cluster's GPUs
	// stranded (cells.Tree.Stranded for the smallest waiting job) while
	// jobs waited; StrandedGPUHours the same integrated.
	Fragmentation    float64
	StrandedGPUHours float64
	// Reclaims: evictions by reclaim, their work lost (GPU-seconds), the
	// most jobs evicted in one pass, and reclaims blocked (by reason).
	Evictions      int
	WorkLostGPUSec float64
	MaxPerPass     int
	Blocked        map[string]int
	Makespan       float64
}

type job struct {
	trace.Job
	acct     int
	progress float64 // seconds of its own run done (checkpointed)
	attained float64 // GPU-seconds of service (LAS), lost work included
	start    float64 // of the current run; -1 waiting
	gpus     []int
	within   bool // runs within its account's quota (counts in withinG)
	outside  bool // ... but in another account's idle cell: evictable there
	epoch    int
	evicted  int
	finish   float64
}

type done struct {
	at    float64
	j     *job
	epoch int
}

type doneHeap []done

func (h doneHeap) Len() int           { return len(h) }
func (h doneHeap) Less(a, b int) bool { return h[a].at < h[b].at }
func (h doneHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *doneHeap) Push(x any)        { *h = append(*h, x.(done)) }
func (h *doneHeap) Pop() any {
	o := *h
	x := o[len(o)-1]
	*h = o[:len(o)-1]
	return x
}

type run struct {
	cfg      Config
	tree     *cells.Tree
	bind     *quota.Binding
	accounts []string
	acctIdx  map[string]int
	quotaG   []int     // quota GPUs per account
	withinG  []int     // GPUs its within-quota jobs hold
	usage    []float64 // fair share: decayed GPU-seconds
	shares   []float64
	running  []*job
	waiting  []*job
	// evicted: this pass's victims, waiting again from the next pass;
	// retry: a reclaim was cut short by the bound, so the next pass runs
	// even if nothing else changes.
	evicted []*job
	retry   bool
	// reserved: this pass's rooms a partial reclaim started on, kept from
	// borrowers until the owner's job takes them (cells: cell ids; count:
	// GPUs).
	reserved     []int
	reservedGPUs int
	done         doneHeap
	res          Result
}

// Run replays tr under cfg.
func Run(tr *trace.Trace, cfg Config) (Result, error) {
	if cfg.PassInterval <= 0 || cfg.MaxReclaimPerPass < 1 || cfg.CheckpointEvery < 0 {
		return Result{}, fmt.Errorf("%w: pass %v s, reclaim bound %d, checkpoints %v s", ErrBadConfig, cfg.PassInterval, cfg.MaxReclaimPerPass, cfg.CheckpointEvery)
	}
	if !slices.Contains(Policies, cfg.Policy) {
		return Result{}, fmt.Errorf("%w: policy %q (one of %v)", ErrBadConfig, cfg.Policy, Policies)
	}
	tree, err := cells.New(cfg.Topology)
	if err != nil {
		return Result{}, err
	}
	r := &run{cfg: cfg, tree: tree, acctIdx: map[string]int{}, res: Result{Policy: cfg.Policy, Blocked: map[string]int{}}}
	if cfg.Policy == QuotaCells || cfg.Policy == QuotaCount {
		// Bound in both, so a quota that does not fit is refused alike;
		// only QuotaCells places by the binding.
		if r.bind, err = quota.Bind(tree, cfg.Quotas); err != nil {
			return Result{}, err
		}
		if cfg.Policy == QuotaCount {
			tree, _ = cells.New(cfg.Topology) // unbound
			r.tree = tree
		}
	}
	var jobs []*job
	for _, tj := range tr.Jobs {
		if tj.GPUs > tree.GPUs() {
			r.res.Unrunnable++
			continue
		}
		jobs = append(jobs, &job{Job: tj, acct: r.account(tj.Cluster), start: -1})
	}
	for i, a := range r.accounts {
		spec := cfg.Quotas[a]
		r.quotaG[i] = spec.GPUs()
		r.shares[i] = float64(spec.GPUs())
	}
	if err := r.loop(jobs); err != nil {
		return Result{}, err
	}
	return r.res, nil
}

func (r *run) account(name string) int {
	if i, ok := r.acctIdx[name]; ok {
		return i
	}
	i := len(r.accounts)
	r.acctIdx[name] = i
	r.accounts = append(r.accounts, name)
	r.quotaG = append(r.quotaG, 0)
	r.withinG = append(r.withinG, 0)
	r.usage = append(r.usage, 0)
	r.shares = append(r.shares, 0)
	return i
}

func (r *run) loop(jobs []*job) error {
	p := r.cfg.PassInterval
	next := 0
	now, last, waited := 0.0, 0.0, 0.0
	for next < len(jobs) || len(r.running) > 0 || len(r.waiting) > 0 {
		changed := false
		for next < len(jobs) && jobs[next].Submit <= now {
			r.waiting = append(r.waiting, jobs[next])
			next++
			changed = true
		}
		for r.done.Len() > 0 && r.done[0].at <= now {
			d := heap.Pop(&r.done).(done)
			if d.epoch != d.j.epoch {
				continue
			}
			r.finish(d.j, d.at)
			changed = true
		}
		r.decay(now - last)
		if changed || r.retry {
			r.retry = false
			r.pass(now)
		}
		// Fragmentation until the next pass.
		nxt := math.Inf(1)
		if next < len(jobs) {
			nxt = jobs[next].Submit
		}
		if r.done.Len() > 0 {
			nxt = min(nxt, r.done[0].at)
		}
		if math.IsInf(nxt, 1) {
			if len(r.waiting) > 0 && len(r.running) == 0 {
				// Every job fits an empty tree, so this is a bug.
				return fmt.Errorf("quotasim: %d jobs wait on an idle cluster at %.0f s", len(r.waiting), now)
			}
			break
		}
		nt := math.Ceil(nxt/p) * p
		if nt <= now || r.retry {
			nt = now + p
		}
		if len(r.waiting) > 0 {
			minJob := math.MaxInt
			for _, j := range r.waiting {
				minJob = min(minJob, j.GPUs)
			}
			s := float64(r.tree.Stranded(minJob))
			r.res.StrandedGPUHours += s * (nt - now) / 3600
			r.res.Fragmentation += s / float64(r.tree.GPUs()) * (nt - now)
			waited += nt - now
		}
		last, now = now, nt
	}
	r.res.Makespan = now
	if waited > 0 {
		r.res.Fragmentation /= waited
	}
	slices.SortFunc(r.res.Jobs, func(a, b JobResult) int { return cmp.Compare(a.ID, b.ID) })
	return nil
}

func (r *run) decay(dt float64) {
	if r.cfg.Policy != FairShare || dt <= 0 {
		return
	}
	f := math.Exp2(-dt / r.cfg.FairShareHalfLife)
	for i := range r.usage {
		r.usage[i] *= f
	}
	for _, j := range r.running {
		r.usage[j.acct] += float64(j.GPUs) * dt
	}
}

func (r *run) finish(j *job, at float64) {
	r.tree.Release(j.gpus)
	if j.within {
		r.withinG[j.acct] -= j.GPUs
	}
	r.running = slices.DeleteFunc(r.running, func(x *job) bool { return x == j })
	r.res.Jobs = append(r.res.Jobs, JobResult{ID: j.ID, Account: j.Cluster, GPUs: j.GPUs, Submit: j.Submit,
		Finish: at, Duration: j.Duration, Evicted: j.evicted})
}

func (r *run) queue(attained float64) int {
	q := 0
	for q < len(r.cfg.Thresholds) && attained >= r.cfg.Thresholds[q] {
		q++
	}
	return q
}

// overShare: FairShare's class, the account's usage fraction above its
// share fraction.
func (r *run) overShare(a int) bool {
	var u, s float64
	for i := range r.usage {
		u += r.usage[i]
		s += r.shares[i]
	}
	if r.shares[a] == 0 || s == 0 {
		return true
	}
	if u == 0 {
		return false
	}
	return r.usage[a]/u > r.shares[a]/s
}

func (r *run) quotas() bool { return r.cfg.Policy == QuotaCells || r.cfg.Policy == QuotaCount }

// pass orders the waiting jobs and starts all that fit, reclaiming for
// within-quota jobs.
func (r *run) pass(now float64) {
	type key struct {
		tier  int // quotas: 0 within quota, 1 borrowing; fair share: 0 under, 1 over
		queue int
	}
	keys := make(map[*job]key, len(r.waiting))
	// Within-quota is decided in order (first fit over the account's
	// held GPUs), so order first by queue and submission, then classify.
	slices.SortStableFunc(r.waiting, func(a, b *job) int {
		if c := cmp.Compare(r.queue(a.attained), r.queue(b.attained)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Submit, b.Submit); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	held := slices.Clone(r.withinG)
	for _, j := range r.waiting {
		k := key{queue: r.queue(j.attained)}
		switch {
		case r.quotas():
			if quota.Within(r.quotaG[j.acct], held[j.acct], j.GPUs) {
				held[j.acct] += j.GPUs
			} else {
				k.tier = 1
			}
		case r.cfg.Policy == FairShare:
			if r.overShare(j.acct) {
				k.tier = 1
			}
		}
		keys[j] = k
	}
	slices.SortStableFunc(r.waiting, func(a, b *job) int {
		ka, kb := keys[a], keys[b]
		if r.quotas() && ka.tier != kb.tier {
			return ka.tier - kb.tier
		}
		if ka.queue != kb.queue {
			return ka.queue - kb.queue
		}
		return ka.tier - kb.tier
	})
	budget := r.cfg.MaxReclaimPerPass
	evictedThisPass := 0
	r.reserved, r.reservedGPUs = r.reserved[:0], 0
	var still []*job
	for _, j := range r.waiting {
		within := r.quotas() && quota.Within(r.quotaG[j.acct], r.withinG[j.acct], j.GPUs)
		room := r.tree.Free()
		if !within {
			room -= r.reservedGPUs
		}
		if room >= j.GPUs {
			if gpus, kept, ok := r.place(j, within); ok {
				r.start(j, gpus, within, within && !kept, now)
				continue
			}
		}
		if within && budget > 0 {
			n := r.reclaim(j, now, budget)
			budget -= n
			evictedThisPass += n
			if n > 0 || r.tree.Free() >= j.GPUs {
				if gpus, kept, ok := r.place(j, within); ok {
					r.start(j, gpus, within, within && !kept, now)
					continue
				}
			}
		}
		still = append(still, j)
	}
	r.res.MaxPerPass = max(r.res.MaxPerPass, evictedThisPass)
	r.waiting = append(still, r.evicted...)
	r.evicted = r.evicted[:0]
}

func ownedBy(a int) cells.Filter {
	return func(t *cells.Tree, c int) bool { return t.Owner(c) == a }
}

func unbound(t *cells.Tree, c int) bool { return t.Owner(c) == -1 }

// place finds GPUs for j: best-fit nodes without cells. With cells, a
// guaranteed job goes in its own cells, then unbound ones; a borrower on
// unbound cells, then any idle cell no reclaim keeps. A guaranteed job
// that finds neither of its places takes an idle cell like a borrower
// and runs as one (kept says so), evictable by that cell's owner: an
// idle GPU is never left idle while a reclaim would cost running work.
func (r *run) place(j *job, within bool) (gpus []int, kept bool, ok bool) {
	if r.cfg.Policy != QuotaCells {
		p, ok := r.tree.AllocBestFit(j.GPUs, nil)
		return p.GPUs, within, ok
	}
	free := r.unreserved
	if within {
		for _, f := range []cells.Filter{ownedBy(r.bind.Index(j.Cluster)), unbound} {
			if p, ok := r.tree.Alloc(j.GPUs, f, true); ok {
				return p.GPUs, true, true
			}
		}
	}
	for _, f := range []cells.Filter{func(t *cells.Tree, c int) bool { return unbound(t, c) && free(t, c) }, free} {
		if p, ok := r.tree.Alloc(j.GPUs, f, true); ok {
			return p.GPUs, false, true
		}
	}
	return nil, false, false
}

// unreserved: cell c overlaps no room a partial reclaim keeps this pass.
func (r *run) unreserved(t *cells.Tree, c int) bool {
	cl := t.Cell(c)
	for _, x := range r.reserved {
		rc := t.Cell(x)
		if cl.First() < rc.First()+rc.GPUs && rc.First() < cl.First()+cl.GPUs {
			return false
		}
	}
	return true
}

func (r *run) start(j *job, gpus []int, within, outside bool, now float64) {
	if r.cfg.Policy == QuotaCells {
		// With cells, a job is within its quota where it runs: wholly in
		// its own account's cells (which hold at most the quota). Any
		// other job borrows and is evictable by the owner of its cells.
		own := r.bind.Index(j.Cluster)
		within, outside = own >= 0, false
		for _, g := range gpus {
			if r.tree.OwnerOfGPU(g) != own {
				within = false
				break
			}
		}
	}
	j.gpus, j.start, j.within, j.outside = gpus, now, within, outside
	if within {
		r.withinG[j.acct] += j.GPUs
	}
	j.epoch++
	r.running = append(r.running, j)
	heap.Push(&r.done, done{at: now + j.Duration - j.progress, j: j, epoch: j.epoch})
}

// reclaim evicts borrowed jobs so that j fits; returns how many.
func (r *run) reclaim(j *job, now float64, budget int) int {
	req := quota.Request{Account: j.Cluster, GPUs: j.GPUs, MaxVictims: budget, Partial: true}
	var roomCells [][]int // each room's cells
	if r.cfg.Policy == QuotaCells {
		owner := r.bind.Index(j.Cluster)
		if j.GPUs > r.tree.NodeGPUs() {
			// Above a node: the owner's whole nodes under one switch.
			bySwitch := map[int][]int{}
			var order []int
			for c := 0; c < r.tree.Cells(); c++ {
				cl := r.tree.Cell(c)
				if cl.Level == cells.LevelNode && r.tree.Owner(c) == owner {
					if _, ok := bySwitch[cl.Switch]; !ok {
						order = append(order, cl.Switch)
					}
					bySwitch[cl.Switch] = append(bySwitch[cl.Switch], c)
				}
			}
			for _, sw := range order {
				room := quota.Room{ID: len(roomCells)}
				for _, c := range bySwitch[sw] {
					room.GPUs += r.tree.Cell(c).GPUs
					if r.tree.CellFree(c) == r.tree.Cell(c).GPUs {
						room.Free += r.tree.Cell(c).GPUs
					}
				}
				if room.GPUs >= j.GPUs {
					req.Rooms = append(req.Rooms, room)
					roomCells = append(roomCells, bySwitch[sw])
				}
			}
		}
		for c := 0; c < r.tree.Cells() && j.GPUs <= r.tree.NodeGPUs(); c++ {
			cl := r.tree.Cell(c)
			if cl.Level == cells.LevelSwitch || cl.GPUs < j.GPUs || r.tree.Owner(c) != owner {
				continue
			}
			// Only the smallest owned cells that hold the job.
			if p := cl.Parent; p >= 0 && r.tree.Owner(p) == owner && r.tree.Cell(p).GPUs >= j.GPUs && cl.GPUs > j.GPUs {
				continue
			}
			req.Rooms = append(req.Rooms, quota.Room{ID: len(roomCells), GPUs: cl.GPUs, Free: r.tree.CellFree(c)})
			roomCells = append(roomCells, []int{c})
		}
	} else {
		req.Rooms = []quota.Room{{ID: -1, GPUs: r.tree.GPUs(), Free: r.tree.Free()}}
	}
	if len(req.Rooms) == 0 {
		r.res.Blocked["no quota cell holds the job"]++
		return 0
	}
	for _, v := range r.running {
		if v.Cluster == j.Cluster {
			continue
		}
		rooms := map[int]int{}
		if r.cfg.Policy == QuotaCells {
			for ri := range req.Rooms {
				for _, g := range v.gpus {
					for _, c := range roomCells[ri] {
						if r.inCell(g, c) {
							rooms[ri]++
							break
						}
					}
				}
			}
		} else {
			rooms[0] = v.GPUs
		}
		ran := now - v.start
		lost := ran
		if r.cfg.CheckpointEvery > 0 {
			lost = math.Mod(ran, r.cfg.CheckpointEvery)
		}
		for ri, n := range rooms {
			req.Candidates = append(req.Candidates, quota.Candidate{Job: v.ID, Account: v.Cluster, Room: ri,
				GPUsIn: n, WorkLost: lost * float64(v.GPUs), Within: v.within && !v.outside})
		}
	}
	plan, err := quota.Choose(req)
	if err != nil {
		kind := blockedKind(err)
		r.res.Blocked[kind]++
		r.retry = r.retry || kind == blockedBound
		return 0
	}
	for _, c := range plan.Victims {
		for _, v := range r.running {
			if v.ID == c.Job {
				r.evict(v, now)
				r.res.WorkLostGPUSec += c.WorkLost
				break
			}
		}
	}
	r.res.Evictions += len(plan.Victims)
	if plan.Remaining > 0 {
		r.res.Blocked[blockedBound+" (partial, finished later)"]++
		r.retry = true
		if r.cfg.Policy == QuotaCells {
			r.reserved = append(r.reserved, roomCells[plan.Room]...)
		} else {
			r.reservedGPUs += plan.GPUsFreed + req.Rooms[plan.Room].Free
		}
	}
	return len(plan.Victims)
}

const blockedBound = "over the per-pass bound"

func blockedKind(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "max_reclaim_per_pass"):
		return blockedBound
	case strings.Contains(s, "within their own"):
		return "cells held within quota"
	default:
		return "nothing to free"
	}
}

func (r *run) inCell(g, c int) bool {
	cl := r.tree.Cell(c)
	return g >= cl.First() && g < cl.First()+cl.GPUs
}

// evict stops v; it restarts from its last checkpoint and waits again.
func (r *run) evict(v *job, now float64) {
	ran := now - v.start
	kept := 0.0
	if r.cfg.CheckpointEvery > 0 {
		kept = math.Floor(ran/r.cfg.CheckpointEvery) * r.cfg.CheckpointEvery
	}
	v.progress += kept
	v.attained += ran * float64(v.GPUs)
	r.tree.Release(v.gpus)
	if v.within {
		r.withinG[v.acct] -= v.GPUs
	}
	v.gpus, v.start, v.within, v.outside = nil, -1, false, false
	v.epoch++
	v.evicted++
	r.running = slices.DeleteFunc(r.running, func(x *job) bool { return x == v })
	r.evicted = append(r.evicted, v)
}
