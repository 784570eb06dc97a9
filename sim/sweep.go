package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// SweepPoint is one Tiresias configuration of a sensitivity sweep.
type SweepPoint struct {
	Mode        priority.Mode
	Thresholds  []float64
	PromoteKnob float64
}

// K is the number of queues.
func (p SweepPoint) K() int { return len(p.Thresholds) + 1 }

func (p SweepPoint) String() string {
	return fmt.Sprintf("%s K=%d thresholds=%s promote_knob=%g", p.Mode, p.K(), FormatThresholds(p.Thresholds), p.PromoteKnob)
}

// FormatThresholds writes thresholds as "3250/7200", or "none".
func FormatThresholds(th []float64) string {
	if len(th) == 0 {
		return "none"
	}
	parts := make([]string, len(th))
	for i, t := range th {
		parts[i] = strconv.FormatFloat(t, 'f', -1, 64)
	}
	return strings.Join(parts, "/")
}

// SweepThresholds are the queue boundaries the sweep tries (GPU-seconds),
// K = 1 to 5: one queue (no preemption at all), single boundaries a decade
// apart, the reference simulator's 3250/7200, and ladders ×10 from 1000
// and from 3250. In gittins mode a queue's upper threshold is also its
// Gittins Δ, so the same list sweeps Δ.
var SweepThresholds = [][]float64{
	{},
	{1000}, {3250}, {10000}, {32500}, {100000},
	{1000, 10000}, {3250, 7200}, {3250, 32500}, {10000, 100000}, {32500, 325000},
	{1000, 10000, 100000}, {3250, 32500, 325000}, {3250, 7200, 32500},
	{1000, 10000, 100000, 1000000}, {3250, 32500, 325000, 3250000},
}

// SweepKnobs are the promote knobs stage 2 adds to each mode's best
// thresholds (stage 1 runs with promotion off).
var SweepKnobs = []float64{1, 2, 4, 8, 16}

// SweepSetting is one cluster the sweep runs every point on.
type SweepSetting struct {
	Name   string
	Config Config
}

// SweepSettingsOn is one setting per node count: cfg with that many
// nodes, named by its GPU count.
func SweepSettingsOn(cfg Config, nodes []int) []SweepSetting {
	settings := make([]SweepSetting, 0, len(nodes))
	for _, n := range nodes {
		c := cfg
		c.Shape.Nodes = n
		settings = append(settings, SweepSetting{Name: fmt.Sprintf("%d GPUs", c.Shape.GPUs()), Config: c})
	}
	return settings
}

// SweepRow is one point of the sweep and what it gave on each setting.
type SweepRow struct {
	Stage   int // 1: thresholds × mode; 2: promote knob
	Point   SweepPoint
	Results []Summary // one per setting, in the settings' order
	// Regret is the point's worst ratio, over the settings, of its average
	// JCT to the best average JCT any point reached on that setting.
	Regret float64
}

// Preemptions is the point's preemptions summed over the settings.
func (r SweepRow) Preemptions() int {
	n := 0
	for _, s := range r.Results {
		n += s.Preemptions
	}
	return n
}

// NumSweepRuns is how many simulations Sweep runs per setting.
func NumSweepRuns() int { return 2*len(SweepThresholds) + 2*len(SweepKnobs) }

// Sweep runs the sensitivity sweep on every setting: stage 1 tries every
// SweepThresholds entry in las and gittins mode without promotion; stage 2
// tries SweepKnobs on each mode's stage-1 point of least regret. Rows come
// in that order, with Regret computed over all of them.
func Sweep(trace *Trace, settings []SweepSetting, parallel int) ([]SweepRow, error) {
	modes := []priority.Mode{priority.ModeLAS, priority.ModeGittins}
	var stage1 []SweepPoint
	for _, mode := range modes {
		for _, th := range SweepThresholds {
			stage1 = append(stage1, SweepPoint{Mode: mode, Thresholds: th})
		}
	}
	rows, err := runPoints(trace, settings, stage1, 1, parallel)
	if err != nil {
		return nil, err
	}
	setRegret(rows)
	var stage2 []SweepPoint
	for _, mode := range modes {
		best := -1
		for i, r := range rows {
			if r.Point.Mode == mode && (best < 0 || r.Regret < rows[best].Regret) {
				best = i
			}
		}
		for _, knob := range SweepKnobs {
			p := rows[best].Point
			p.PromoteKnob = knob
			stage2 = append(stage2, p)
		}
	}
	more, err := runPoints(trace, settings, stage2, 2, parallel)
	if err != nil {
		return nil, err
	}
	rows = append(rows, more...)
	setRegret(rows)
	return rows, nil
}

func runPoints(trace *Trace, settings []SweepSetting, points []SweepPoint, stage, parallel int) ([]SweepRow, error) {
	var variants []Variant
	for _, p := range points {
		for _, s := range settings {
			c := s.Config
			c.Policy = string(p.Mode)
			c.PolicyOptions.Tiresias.FixThresholds(p.Thresholds)
			c.PolicyOptions.Tiresias.PromoteKnob = p.PromoteKnob
			variants = append(variants, Variant{Label: s.Name + " " + p.String(), Config: c})
		}
	}
	results, err := RunAll(trace, variants, parallel)
	if err != nil {
		return nil, err
	}
	rows := make([]SweepRow, len(points))
	for i, p := range points {
		rows[i] = SweepRow{Stage: stage, Point: p}
		for k := range settings {
			rows[i].Results = append(rows[i].Results, results[i*len(settings)+k].Summary)
		}
	}
	return rows, nil
}

func setRegret(rows []SweepRow) {
	if len(rows) == 0 {
		return
	}
	for k := range rows[0].Results {
		best := math.Inf(1)
		for _, r := range rows {
			best = min(best, r.Results[k].AvgJCT)
		}
		for i := range rows {
			if k == 0 {
				rows[i].Regret = 0
			}
			rows[i].Regret = max(rows[i].Regret, rows[i].Results[k].AvgJCT/best)
		}
	}
}

// ChoiceTolerance is how close to the least regret a point must come to be
// a candidate for the default.
const ChoiceTolerance = 0.01

// Chosen picks the default from a sweep: the candidates are the points
// whose regret is within ChoiceTolerance of the least, and among them the
// one with the fewest preemptions wins (then the least regret). Every
// preemption is a Slurm requeue: work since the job's last checkpoint is
// lost and the cluster churns, a cost the simulated JCTs see only through
// the restart penalty, so at equal JCT the calmer configuration is better.
func Chosen(rows []SweepRow) (SweepRow, bool) {
	if len(rows) == 0 {
		return SweepRow{}, false
	}
	least := slices.MinFunc(rows, func(a, b SweepRow) int { return cmp.Compare(a.Regret, b.Regret) }).Regret
	var best SweepRow
	found := false
	for _, r := range rows {
		if r.Regret > least*(1+ChoiceTolerance) {
			continue
		}
		if !found || r.Preemptions() < best.Preemptions() ||
			(r.Preemptions() == best.Preemptions() && r.Regret < best.Regret) {
			best, found = r, true
		}
	}
	return best, found
}
