package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// HeteroPolicy is how a heterogeneous run places jobs on GPU types and
// counts their service.
type HeteroPolicy string

const (
	// HeteroAgnostic is today's Lachesis on a mixed cluster: it does not
	// look at types. Service is GPU-seconds held, and a job goes to the
	// first of its types (those its model runs on), in a rotation that
	// starts at job ID mod the number of types, where it has room.
	HeteroAgnostic HeteroPolicy = "agnostic"
	// HeteroEffective counts service in effective throughput, GPU-seconds
	// × the job's speed on the type it runs on (reference-type-equivalent
	// work, Gavel's unit), and places each job on the type where the
	// placement it can get now runs it fastest: its fastest free type, by
	// its own speeds. That is not the comparative advantage (speeds relative
	// to the other models') that job_submit/placement's --prefer uses: at a
	// start, with the room known, the job's own fastest type serves it best.
	// It never waits for a type while another has room.
	HeteroEffective HeteroPolicy = "effective"
)

// DefaultSensitiveBelow is the placement-sensitivity threshold: a
// multi-GPU job is placement-sensitive on a type when its spread
// throughput there is below 0.8 × its consolidated one (or was never
// measured), that is when spreading loses more than a fifth of its speed.
const DefaultSensitiveBelow = 0.8

// HeteroConfig makes a run heterogeneous: the cluster's nodes form equal
// groups of GPU types, and job speeds come from the Gavel table instead of
// the Synergy profiles.
type HeteroConfig struct {
	Table *GavelTable
	// Types are the node groups: node n has type Types[n mod len(Types)],
	// so every type has Shape.Nodes / len(Types) nodes (Nodes must be a
	// multiple) and the node order favours no type.
	Types []string
	// Reference is the type the trace's durations were measured on,
	// consolidated: a job's speed on type t with placement p is
	// thr(model, t, p) / thr(model, Reference, consolidated).
	Reference string
	Policy    HeteroPolicy
	// Consolidate: a multi-GPU job that is placement-sensitive on a type
	// starts there only consolidated (on the fewest nodes) and otherwise
	// waits or goes to another type; insensitive jobs may spread when no
	// consolidated room is free. Off: every job takes consolidated room
	// when free and spreads otherwise, at its spread speed.
	Consolidate bool
	// SensitiveBelow is the sensitivity threshold (DefaultSensitiveBelow
	// when 0).
	SensitiveBelow float64
}

// HeteroVariants crosses every base variant with each of the policies and
// consolidation settings on a heterogeneous cluster (proto's Table, Types,
// Reference and SensitiveBelow); each is labelled base/HeteroConfig.Label.
func HeteroVariants(base []Variant, proto HeteroConfig, policies []HeteroPolicy, consolidate []bool) []Variant {
	var out []Variant
	for _, v := range base {
		for _, p := range policies {
			for _, c := range consolidate {
				hc := proto
				hc.Types = slices.Clone(proto.Types)
				hc.Policy, hc.Consolidate = p, c
				v2 := v
				v2.Config.Hetero = &hc
				v2.Label = v.Label + "/" + hc.Label()
				out = append(out, v2)
			}
		}
	}
	return out
}

// Label names the configuration in reports: "effective+consolidate".
func (h *HeteroConfig) Label() string {
	if h.Consolidate {
		return string(h.Policy) + "+consolidate"
	}
	return string(h.Policy)
}

// hetJob is a job's heterogeneous data.
type hetJob struct {
	model GavelModel
	// speed[t][p] is the job's speed on type t with placement p (see
	// HeteroConfig.Reference), 0 where it cannot run.
	speed [][2]float64
	// sensitive[t]: spreading on t loses more than the threshold allows.
	sensitive []bool
	// pref lists the types the job can run on, in the order placement
	// tries them.
	pref      []int
	effective bool
	// typ and cons are the current (or last) run's type and consolidation.
	typ  int
	cons Consolidation
}

// hetCluster is the heterogeneous part of the cluster.
type hetCluster struct {
	cfg         HeteroConfig
	consolidate bool
	effective   bool
	typeOf      []int   // node → type
	posOf       []int   // node → position in nodesOf[type]
	nodesOf     [][]int // type → nodes, ascending
	// busy is each type's GPU-seconds held within the submission window
	// [0, window], the stretch in which the trace's load arrives (the
	// makespan also covers the tail of a few long jobs).
	busy    []float64
	window  float64
	starts  []int
	spreads int
	// scratch
	free  []int
	order []int
	picks []pick
	best  []pick
	cands []*JobState
}

// pick is some GPUs of one node of a type, by position in nodesOf.
type pick struct{ pos, gpus int }

// initHetero checks the heterogeneous settings, gives the cluster its node
// types and every job its Gavel model and speeds.
func (e *engine) initHetero() error {
	h := e.cfg.Hetero
	if h.Table == nil || len(h.Types) == 0 {
		return fmt.Errorf("%w: heterogeneous run needs the Gavel table and GPU types", ErrBadConfig)
	}
	if e.cfg.Alloc != AllocProportional || e.cfg.Shape.GPUCountOnly {
		return fmt.Errorf("%w: heterogeneous runs use proportional allocation on nodes", ErrBadConfig)
	}
	for _, t := range append([]string{h.Reference}, h.Types...) {
		if !slices.Contains(h.Table.Types, t) {
			return fmt.Errorf("%w: GPU type %q is not in the Gavel table (%s)", ErrBadConfig, t, strings.Join(h.Table.Types, ", "))
		}
	}
	k := len(h.Types)
	if e.cfg.Shape.Nodes%k != 0 {
		return fmt.Errorf("%w: %d nodes do not split into %d equal GPU types", ErrBadConfig, e.cfg.Shape.Nodes, k)
	}
	switch h.Policy {
	case HeteroAgnostic, HeteroEffective:
	default:
		return fmt.Errorf("%w: heterogeneous policy %q is not %q or %q", ErrBadConfig, h.Policy, HeteroAgnostic, HeteroEffective)
	}
	below := h.SensitiveBelow
	if below == 0 {
		below = DefaultSensitiveBelow
	}
	hc := &hetCluster{
		cfg:         *h,
		consolidate: h.Consolidate,
		effective:   h.Policy == HeteroEffective,
		typeOf:      make([]int, e.cfg.Shape.Nodes),
		posOf:       make([]int, e.cfg.Shape.Nodes),
		nodesOf:     make([][]int, k),
		busy:        make([]float64, k),
		starts:      make([]int, k),
	}
	for n := range hc.typeOf {
		t := n % k
		hc.typeOf[n], hc.posOf[n] = t, len(hc.nodesOf[t])
		hc.nodesOf[t] = append(hc.nodesOf[t], n)
	}
	typeGPUs := e.cfg.Shape.GPUs() / k
	if n := len(e.jobs); n > 0 {
		hc.window = e.jobs[n-1].Job.Submit
	}
	for i := range e.jobs {
		j := &e.jobs[i]
		m, ok := h.Table.Named(j.Job.Model, j.Job.GPUs, h.Reference)
		if !ok {
			m, ok = h.Table.GavelAssign(&j.Job, h.Reference, e.cfg.Seed)
		}
		if !ok {
			return fmt.Errorf("%w: job %d: no Gavel model ran %d GPUs on %s", ErrBadConfig, j.Job.ID, j.Job.GPUs, h.Reference)
		}
		hj := &hetJob{model: m, speed: make([][2]float64, k), sensitive: make([]bool, k), effective: hc.effective, typ: -1}
		for t, typ := range h.Types {
			c := h.Table.Speed(m, j.Job.GPUs, typ, Consolidated, h.Reference)
			s := h.Table.Speed(m, j.Job.GPUs, typ, Spread, h.Reference)
			hj.speed[t] = [2]float64{c, s}
			hj.sensitive[t] = j.Job.GPUs > 1 && s < below*c
			if c > 0 {
				hj.pref = append(hj.pref, t)
			}
		}
		if len(hj.pref) == 0 || j.Job.GPUs > typeGPUs {
			return fmt.Errorf("%w: job %d (%s, %d GPUs) fits no GPU type of %d GPUs it runs on", ErrJobTooLarge, j.Job.ID, m, j.Job.GPUs, typeGPUs)
		}
		if hc.effective {
			slices.SortStableFunc(hj.pref, func(a, b int) int { return cmp.Compare(hj.speed[b][0], hj.speed[a][0]) })
		} else {
			r := int(j.Job.ID % uint32(k))
			slices.SortStableFunc(hj.pref, func(a, b int) int { return cmp.Compare((a-r+k)%k, (b-r+k)%k) })
		}
		j.Model, j.Profile, j.het = m.String(), nil, hj
	}
	e.cluster.het = hc
	return nil
}

// mustConsolidate says whether j may start on type t only consolidated.
func (h *hetCluster) mustConsolidate(j *JobState, t int) bool {
	hj := j.het
	return hj.speed[t][Spread] <= 0 || (h.consolidate && hj.sensitive[t])
}

// couldFit is a quick necessary condition: enough GPUs free in some type.
func (h *hetCluster) couldFit(c *cluster, gpus int) bool {
	return c.freeGPUs >= gpus
}

// loadFree copies the free GPUs of type t's nodes into h.free.
func (h *hetCluster) loadFree(c *cluster, t int) []int {
	h.free = h.free[:0]
	for _, n := range h.nodesOf[t] {
		h.free = append(h.free, c.free[n].GPUs)
	}
	return h.free
}

// plan finds room for j on type t's nodes with free GPUs free (by
// position), appending the picks to out. A job of at most a node's GPUs
// goes on the fullest node that fits it (best fit, lowest position on a
// tie); a larger one on ⌊G/per⌋ whole nodes (lowest first) plus the best
// fit for the rest. That is consolidated. Failing that, where the job may
// spread, it takes the nodes with the most free GPUs first (fewest nodes);
// that is spread unless it happens to use no more than ⌈G/per⌉ nodes.
func (h *hetCluster) plan(j *JobState, t int, free []int, per int, out []pick) ([]pick, Consolidation, bool) {
	g := j.Job.GPUs
	start := len(out)
	bestFit := func(need int, used func(int) bool) int {
		best := -1
		for p, f := range free {
			if f >= need && !used(p) && (best < 0 || f < free[best]) {
				best = p
			}
		}
		return best
	}
	none := func(int) bool { return false }
	if g <= per {
		if p := bestFit(g, none); p >= 0 {
			return append(out, pick{p, g}), Consolidated, true
		}
		if h.mustConsolidate(j, t) {
			return out, 0, false
		}
	} else {
		for p, f := range free {
			if len(out)-start == g/per {
				break
			}
			if f == per {
				out = append(out, pick{p, per})
			}
		}
		if len(out)-start == g/per {
			rest := g % per
			if rest == 0 {
				return out, Consolidated, true
			}
			inPlan := func(p int) bool {
				return slices.ContainsFunc(out[start:], func(k pick) bool { return k.pos == p })
			}
			if p := bestFit(rest, inPlan); p >= 0 {
				return append(out, pick{p, rest}), Consolidated, true
			}
		}
		out = out[:start]
	}
	h.order = h.order[:0]
	total := 0
	for p, f := range free {
		if f > 0 {
			h.order = append(h.order, p)
			total += f
		}
	}
	if total < g {
		return out, 0, false
	}
	slices.SortStableFunc(h.order, func(a, b int) int { return cmp.Compare(free[b], free[a]) })
	need := g
	for _, p := range h.order {
		if need == 0 {
			break
		}
		take := min(need, free[p])
		out = append(out, pick{p, take})
		need -= take
	}
	if len(out)-start <= (g+per-1)/per {
		return out, Consolidated, true
	}
	if h.mustConsolidate(j, t) {
		return out[:start], 0, false
	}
	return out, Spread, true
}

// placeFree is cluster.placeFree on a heterogeneous cluster: it tries the
// job's types in its preference order; the agnostic policy takes the first
// with room, the effective one the fastest placement found.
func (h *hetCluster) placeFree(c *cluster, j *JobState) (float64, bool) {
	per := c.perNode()
	bestT, bestSpeed, bestCons := -1, 0.0, Consolidated
	for _, t := range j.het.pref {
		var ok bool
		var cons Consolidation
		h.picks, cons, ok = h.plan(j, t, h.loadFree(c, t), per, h.picks[:0])
		if !ok {
			continue
		}
		if sp := j.het.speed[t][cons]; sp > bestSpeed {
			bestT, bestSpeed, bestCons = t, sp, cons
			h.best = append(h.best[:0], h.picks...)
		}
		if !h.effective {
			break
		}
	}
	if bestT < 0 {
		return 0, false
	}
	c.plan = c.plan[:0]
	for _, p := range h.best {
		c.plan = append(c.plan, slot{node: int32(h.nodesOf[bestT][p.pos]), gpus: int32(p.gpus)})
	}
	j.het.typ, j.het.cons = bestT, bestCons
	h.starts[bestT]++
	if bestCons == Spread {
		h.spreads++
	}
	return bestSpeed, true
}

// planVictims is planPreemption on a heterogeneous cluster. On each of the
// job's types it takes eligible jobs running there, lowest-ranked first,
// until the job could be placed, then spares those it does not need after
// all (best-ranked first); it picks the type needing the fewest victims,
// the earlier in the job's preference order on a tie.
func (h *hetCluster) planVictims(c *cluster, j *JobState, eligible func(*JobState) bool, out []*JobState) ([]*JobState, bool) {
	per, g := c.perNode(), j.Job.GPUs
	bestT, bestN := -1, 0
	var bestVictims []*JobState
	for _, t := range j.het.pref {
		free := h.loadFree(c, t)
		room := 0
		h.cands = h.cands[:0]
		for p, n := range h.nodesOf[t] {
			room += free[p]
			for _, v := range c.jobsOn[n] {
				if eligible(v) {
					h.cands = append(h.cands, v)
					room += int(v.slotOn(n).gpus)
				}
			}
		}
		if room < g {
			continue
		}
		slices.SortFunc(h.cands, c.victimOrder)
		cands := slices.Compact(h.cands)
		give := func(v *JobState, sign int) {
			for _, s := range v.slots {
				free[h.posOf[s.node]] += sign * int(s.gpus)
			}
		}
		fits := func() bool {
			var ok bool
			h.picks, _, ok = h.plan(j, t, free, per, h.picks[:0])
			return ok
		}
		taken := 0
		for taken < len(cands) && !fits() {
			give(cands[taken], +1)
			taken++
		}
		if !fits() {
			continue
		}
		victims := make([]*JobState, 0, taken)
		for i := taken - 1; i >= 0; i-- {
			give(cands[i], -1)
			if !fits() {
				give(cands[i], +1)
				victims = append(victims, cands[i])
			}
		}
		if bestT < 0 || len(victims) < bestN {
			bestT, bestN, bestVictims = t, len(victims), victims
		}
		if bestN == 0 {
			break
		}
	}
	if bestT < 0 {
		return out, false
	}
	return append(out, bestVictims...), true
}

// account adds a closed run's GPU-seconds within the submission window
// to its type's busy time.
func (h *hetCluster) account(j *JobState, start, end float64) {
	if j.het.typ >= 0 {
		h.busy[j.het.typ] += float64(j.Job.GPUs) * max(0, min(end, h.window)-start)
	}
}

// accountSeconds is the current run's length at now as the job's Tiresias
// account counts it: wall seconds. Under the effective-throughput policy
// the account weights them by the run's speed itself (Account.RunSpeed,
// set when the run starts, through priority.EffectiveRate, the core's
// rule), so service is reference-type-equivalent GPU-seconds while the
// promotion rule's last-run length stays in wall seconds, as in the core.
func (j *JobState) accountSeconds(now float64) float64 { return now - j.RunStart }

// serviceRate is how fast a running job's service grows: its GPUs, times
// its speed under the effective-throughput policy.
func (j *JobState) serviceRate() float64 {
	return priority.EffectiveRate(uint32(j.Job.GPUs), j.Account.RunSpeed)
}

// planVictims dispatches to the heterogeneous planner where there is one.
func (c *cluster) planVictims(j *JobState, eligible func(*JobState) bool, out []*JobState) ([]*JobState, bool) {
	c.planning = true
	defer func() { c.planning = false }()
	if c.het != nil {
		return c.het.planVictims(c, j, eligible, out)
	}
	return c.planPreemption(j, eligible, out)
}
