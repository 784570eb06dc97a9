package sim

import (
	"fmt"
	"math"
	"os"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// Window is a half-open range of job IDs, [From, To), whose jobs a
// measurement averages over.
type Window struct{ From, To uint32 }

// SynergyWindow is the Synergy simulator's measurement window: it averages
// the JCT of jobs 4000–4999 only, leaving out the warm-up of an empty
// cluster, and keeps jobs arriving until all of those have finished.
var SynergyWindow = Window{From: 4000, To: 5000}

func (w Window) contains(id uint32) bool { return id >= w.From && id < w.To }

// WindowAvgJCT is the average JCT of a result's jobs inside the window and
// how many there were.
func WindowAvgJCT(r *Result, w Window) (float64, int) {
	var sum float64
	n := 0
	for _, j := range r.Jobs {
		if w.contains(j.ID) {
			sum += j.JCT
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
}

// maxReplayRounds bounds how often ReplaySynergy grows a job list. Under a
// policy where no later arrival delays an earlier job (strict FIFO) the
// second round always suffices; one that lets later jobs overtake for
// ever (FIFO with skipping, on an overloaded cluster, starves 8-GPU jobs
// while 1-GPU jobs keep arriving) never drains, and is refused.
const maxReplayRounds = 4

// ReplaySynergy generates the job list w and simulates every variant on it,
// measuring as the Synergy simulator does: arrivals go on until every job
// of the window has finished in every variant. It starts with w.Jobs jobs
// (at least the window's end) and, while some window job finishes after
// the last arrival, regenerates a longer list with the same seed (which
// begins with the shorter one) and runs again. Jobs that arrive after the
// window's last completion cannot change the window's JCTs, so the result
// equals that of an endless arrival stream. It returns the results and the
// list they ran on.
func ReplaySynergy(w trace.SynergyWorkload, window Window, variants []Variant, parallel int) ([]*Result, *Trace, error) {
	if window.To <= window.From {
		return nil, nil, fmt.Errorf("%w: empty measurement window [%d, %d)", trace.ErrBadWorkload, window.From, window.To)
	}
	w.Jobs = max(w.Jobs, int(window.To))
	for round := 1; ; round++ {
		tr, err := trace.GenerateSynergyJobs(w)
		if err != nil {
			return nil, nil, err
		}
		results, err := RunAll(tr, variants, parallel)
		if err != nil {
			return nil, nil, err
		}
		var lastFinish float64
		for _, r := range results {
			for _, j := range r.Jobs {
				if window.contains(j.ID) {
					lastFinish = max(lastFinish, j.Finish)
				}
			}
		}
		lastArrival := tr.Jobs[len(tr.Jobs)-1].Submit
		if lastArrival >= lastFinish {
			return results, tr, nil
		}
		if round == maxReplayRounds {
			return nil, nil, fmt.Errorf("%w: the window's jobs still run after %d arrivals: later arrivals keep delaying them", trace.ErrBadWorkload, w.Jobs)
		}
		// Enough jobs to reach the window's last completion at the
		// observed rate, plus a margin; the completion moves later as
		// more jobs compete, hence the margin.
		grow := float64(w.Jobs) * (lastFinish / lastArrival) * 1.1
		w.Jobs = max(int(grow)+100, w.Jobs*5/4)
	}
}

// SynergyReplayPlan is a synergy replay: a job list at every rate and
// seed, each replayed under every policy with proportional, start-time
// (sized at sbatch and again at start, as slurmctld does) and Synergy
// allocation at every reserve, measured over SynergyWindow.
type SynergyReplayPlan struct {
	// Workload is the lists' mix (split, GPU demands, draws); the rate
	// and seed are set per list.
	Workload trace.SynergyWorkload
	Rates    []float64
	Seeds    []uint64
	Policies []string
	// Reserves are the Synergy allocation reserves compared.
	Reserves []float64
	// Base is every run's configuration: shape, profiles, models,
	// start-time sizing.
	Base     Config
	Parallel int
	// Simulated, if set, is told of each list once it is simulated.
	Simulated func(rate float64, seed uint64, jobs int)
}

// SynergyReplayRow is one (list, policy, reserve) of a synergy replay.
type SynergyReplayRow struct {
	Rate             float64
	Seed             uint64
	Jobs, WindowJobs int
	// Load is the list's offered load on the cluster (OfferedLoad).
	Load    float64
	Policy  string
	Reserve float64
	// ProportionalJCT and SynergyJCT are the window's average JCTs,
	// seconds; SynergySpeed the Synergy run's average speed.
	ProportionalJCT, SynergyJCT, SynergySpeed float64
	// StartJCT and StartSpeed: the start-time sizing slurmctld runs
	// (AllocStart), the same for every reserve.
	StartJCT, StartSpeed float64
}

// SynergyReplayVariants are the runs of each list: per policy,
// proportional, start-time, and Synergy at each reserve.
func SynergyReplayVariants(base Config, policies []string, reserves []float64) []Variant {
	var variants []Variant
	for _, p := range policies {
		c := base
		c.Policy, c.Alloc = p, AllocProportional
		variants = append(variants, Variant{Label: p + "/proportional", Config: c})
		c.Alloc = AllocStart
		variants = append(variants, Variant{Label: p + "/start", Config: c})
		for _, r := range reserves {
			c := base
			c.Policy, c.Alloc, c.Reserve = p, AllocSynergy, r
			variants = append(variants, Variant{Label: synergyReserveLabel(p, r), Config: c})
		}
	}
	return variants
}

func synergyReserveLabel(policy string, reserve float64) string {
	return fmt.Sprintf("%s/synergy-reserve%g", policy, reserve)
}

// RunSynergyReplay runs the plan, list by list, and returns one row per
// list, policy and reserve.
func RunSynergyReplay(p SynergyReplayPlan) ([]SynergyReplayRow, error) {
	variants := SynergyReplayVariants(p.Base, p.Policies, p.Reserves)
	w := p.Workload
	var rows []SynergyReplayRow
	for _, rate := range p.Rates {
		for _, seed := range p.Seeds {
			w.JobsPerHour, w.Seed = rate, seed
			results, tr, err := ReplaySynergy(w, SynergyWindow, variants, p.Parallel)
			if err != nil {
				return nil, fmt.Errorf("%g jobs/h, seed %d: %w", rate, seed, err)
			}
			byLabel := map[string]*Result{}
			for i, r := range results {
				byLabel[variants[i].Label] = r
			}
			for _, pol := range p.Policies {
				prop, _ := WindowAvgJCT(byLabel[pol+"/proportional"], SynergyWindow)
				start, _ := WindowAvgJCT(byLabel[pol+"/start"], SynergyWindow)
				startSpeed := byLabel[pol+"/start"].Summary.AvgSpeed
				for _, res := range p.Reserves {
					r := byLabel[synergyReserveLabel(pol, res)]
					sized, n := WindowAvgJCT(r, SynergyWindow)
					rows = append(rows, SynergyReplayRow{Rate: rate, Seed: seed, Jobs: len(tr.Jobs),
						Load: OfferedLoad(tr, p.Base.Shape), Policy: pol, Reserve: res, WindowJobs: n,
						ProportionalJCT: prop, SynergyJCT: sized, SynergySpeed: r.Summary.AvgSpeed,
						StartJCT: start, StartSpeed: startSpeed})
				}
			}
			if p.Simulated != nil {
				p.Simulated(rate, seed, len(tr.Jobs))
			}
		}
	}
	return rows, nil
}

// OfferedLoad is the GPU work a list brings per unit of time over the
// cluster's GPUs, at the proportional share: above 1, queues grow without
// bound while jobs keep arriving.
func OfferedLoad(t *Trace, shape Shape) float64 {
	return t.GPUSeconds() / t.Span() / float64(shape.GPUs())
}

// CheckSynergyModels refuses a throughput table that lacks a model of the
// Synergy workload: its jobs would silently run unprofiled.
func CheckSynergyModels(table sensitivity.Profiles) error {
	for _, class := range trace.SynergyTaskModels {
		for _, m := range class.Models {
			if table[m] == nil {
				return fmt.Errorf("throughput table has no model %q of the Synergy workload", m)
			}
		}
	}
	return nil
}

// ReadProfiles reads a throughput table (sensitivity.ReadThroughputCSV)
// from path.
func ReadProfiles(path string) (sensitivity.Profiles, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := sensitivity.ReadThroughputCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
