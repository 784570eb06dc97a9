package profiler

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// recorded replays a recorded sweep: throughput by CPU count.
func recorded(t *testing.T, tput func(cpus int) float64) (measureFunc, *[]int) {
	var order []int
	return func(cpus, point, points int) (profile.Measurement, error) {
		if point != len(order)+1 || points < point {
			t.Errorf("point %d of %d after %d measured", point, points, len(order))
		}
		order = append(order, cpus)
		return profile.Measurement{CPUs: cpus, Throughput: tput(cpus)}, nil
	}, &order
}

func upTo(n int) []int { return candidateCounts(n, 1) }

func TestSweepCPUs_RecordedSweeps(t *testing.T) {
	cases := []struct {
		name   string
		counts []int
		extra  []int
		tput   func(int) float64
		want   []int // in the order measured
		best   int   // smallest measured count within 10%
	}{
		{"flat throughput halves all the way to one CPU", upTo(8), nil,
			func(int) float64 { return 100 }, []int{8, 4, 2, 1}, 1},
		{"a knee at 5 of 8 bisects between the halving that failed and the last that held", upTo(8), nil,
			func(c int) float64 { return float64(min(c, 5)) }, []int{8, 4, 6, 5}, 5},
		{"a knee above 2 of 2 CPUs measures both and needs both", upTo(2), nil,
			func(c int) float64 { return float64(c) }, []int{2, 1}, 2},
		{"a knee at 1 of 2 CPUs measures both and needs one", upTo(2), nil,
			func(int) float64 { return 7 }, []int{2, 1}, 1},
		{"one CPU is one point", upTo(1), nil,
			func(int) float64 { return 3 }, []int{1}, 1},
		{"within tolerance of the best, not of the largest count", upTo(4), nil,
			func(c int) float64 { return []float64{0, 50, 100, 104, 100}[c] }, []int{4, 2, 1}, 2},
		{"the proportional share is measured when the search skips it", upTo(24), []int{5},
			func(int) float64 { return 1 }, []int{24, 12, 6, 3, 1, 5}, 1},
		{"two GPUs sweep whole CPUs per GPU", candidateCounts(16, 2), nil,
			func(c int) float64 { return float64(min(c, 6)) }, []int{16, 8, 4, 6}, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			measure, order := recorded(t, c.tput)
			ms, err := sweepCPUs(c.counts, 0.1, c.extra, measure)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(*order, c.want) {
				t.Errorf("measured %v, want %v", *order, c.want)
			}
			if !slices.IsSortedFunc(ms, func(a, b profile.Measurement) int { return a.CPUs - b.CPUs }) || len(ms) != len(c.want) {
				t.Errorf("measurements %v are not the %d points in ascending order", ms, len(c.want))
			}
			if got := smallestWithin(ms, 0.1); got != c.best {
				t.Errorf("smallest count within 10%% = %d, want %d", got, c.best)
			}
		})
	}
}

func smallestWithin(ms []profile.Measurement, tol float64) int {
	best := 0.0
	for _, m := range ms {
		best = max(best, m.Throughput)
	}
	for _, m := range ms {
		if m.Throughput >= (1-tol)*best {
			return m.CPUs
		}
	}
	return 0
}

func TestSweepCPUs_MeasurementErrorStopsTheSweep(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, err := sweepCPUs(upTo(8), 0.1, nil, func(cpus, _, _ int) (profile.Measurement, error) {
		calls++
		if cpus == 4 {
			return profile.Measurement{}, boom
		}
		return profile.Measurement{CPUs: cpus, Throughput: 1}, nil
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Fatalf("err %v after %d calls, want boom after 2", err, calls)
	}
}

// Synergy's published profiles are the oracle: replaying each model's CPU
// row with everything in memory (the largest memory column) through the
// sweep, and keeping only the rows it measured, must give the best case
// Synergy's summary reports, while measuring fewer points than its grid.
func TestSweepCPUs_FindsSynergysBestCaseOnItsOwnProfiles(t *testing.T) {
	profiles, summary := synergyReference(t)
	gridPoints, swept := 0, 0
	for _, row := range summary {
		t.Run(row.Model, func(t *testing.T) {
			p := profiles[row.Model]
			inMemory := len(p.MemGB) - 1
			measure, order := recorded(t, func(cpus int) float64 {
				return p.Throughput[slices.Index(p.CPUs, cpus)][inMemory]
			})
			if _, err := sweepCPUs(p.CPUs, sensitivity.DefaultTolerance, nil, measure); err != nil {
				t.Fatal(err)
			}
			measured := restrictRows(p, *order)
			got, _ := measured.BestCase(sensitivity.DefaultTolerance)
			if got.CPUsPerGPU != row.Best.CPUsPerGPU || math.Floor(got.MemGBPerGPU) != math.Floor(row.Best.MemGBPerGPU) {
				t.Errorf("best case %+v from sweep %v, Synergy's summary says %+v", got, *order, row.Best)
			}
			gridPoints += len(p.CPUs)
			swept += len(*order)
		})
	}
	if swept >= gridPoints {
		t.Errorf("the sweep measured %d points, the reference grid has %d", swept, gridPoints)
	}
	t.Logf("measured %d CPU points for %d models where the reference grid has %d", swept, len(summary), gridPoints)
}

// restrictRows is p with only the CPU rows in cpus.
func restrictRows(p *sensitivity.Profile, cpus []int) *sensitivity.Profile {
	out := &sensitivity.Profile{Model: p.Model, MemGB: p.MemGB}
	for i, c := range p.CPUs {
		if slices.Contains(cpus, c) {
			out.CPUs = append(out.CPUs, c)
			out.Throughput = append(out.Throughput, p.Throughput[i])
		}
	}
	return out
}

// synergyReference reads the Synergy tables shipped in the repository's
// data/; they are part of every checkout, so their absence fails the test.
func synergyReference(t *testing.T) (sensitivity.Profiles, []sensitivity.SummaryRow) {
	t.Helper()
	open := func(name string) *os.File {
		f, err := os.Open(refdata.Path(t, "synergy/"+name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	profiles, err := sensitivity.ReadThroughputCSV(open("synergy_model_throughput.csv"))
	if err != nil {
		t.Fatal(err)
	}
	summary, err := sensitivity.ReadSummaryCSV(open("synergy_model_summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	return profiles, summary
}
