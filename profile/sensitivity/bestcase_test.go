package sensitivity

import (
	"math"
	"os"
	"testing"
)

func loadSummary(t *testing.T) []SummaryRow {
	t.Helper()
	f, err := os.Open(refData(t, "synergy/synergy_model_summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := ReadSummaryCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// The summary writes 20.83 GB (the smallest column) as 20; compare memory to
// the nearest whole GB below.
func sameMem(got, summary float64) bool { return math.Floor(got) == math.Floor(summary) }

func TestBestCase_DefaultToleranceReproducesTheSummary(t *testing.T) {
	ps := loadProfiles(t)
	for _, row := range loadSummary(t) {
		t.Run(row.Model, func(t *testing.T) {
			p, ok := ps[row.Model]
			if !ok {
				t.Fatalf("summary model %q has no throughput profile", row.Model)
			}
			got, tput := p.BestCase(DefaultTolerance)
			if got.CPUsPerGPU != row.Best.CPUsPerGPU || !sameMem(got.MemGBPerGPU, row.Best.MemGBPerGPU) {
				t.Errorf("best case = %d CPUs, %v GB; summary says %d CPUs, %v GB",
					got.CPUsPerGPU, got.MemGBPerGPU, row.Best.CPUsPerGPU, row.Best.MemGBPerGPU)
			}
			if math.Abs(tput-row.Speedup) > 1e-9 {
				t.Errorf("best-case throughput %v, summary speed-up %v", tput, row.Speedup)
			}
		})
	}
}

// The documented range of tolerances that reproduce the summary: [0, 3.87%).
func TestBestCase_ToleranceRangeThatReproducesTheSummary(t *testing.T) {
	ps := loadProfiles(t)
	summary := loadSummary(t)
	matches := func(tol float64) bool {
		for _, row := range summary {
			got, _ := ps[row.Model].BestCase(tol)
			if got.CPUsPerGPU != row.Best.CPUsPerGPU || !sameMem(got.MemGBPerGPU, row.Best.MemGBPerGPU) {
				return false
			}
		}
		return true
	}
	for _, tol := range []float64{0, 0.01, DefaultTolerance, 0.038} {
		if !matches(tol) {
			t.Errorf("tolerance %v should reproduce the summary", tol)
		}
	}
	if matches(0.04) {
		t.Error("tolerance 0.04 should no longer reproduce the summary (mobilenet drops to 5 CPUs)")
	}
}

func TestBestCase_PicksFewestCPUsThenLeastMemory(t *testing.T) {
	p := &Profile{
		Model: "synthetic",
		CPUs:  []int{1, 2, 4},
		MemGB: []float64{10, 20},
		Throughput: [][]float64{
			{0.5, 0.6},
			{0.9, 1.0}, // 2 CPUs, 20 GB reaches the maximum first by CPUs
			{1.0, 1.0},
		},
	}
	cases := []struct {
		name string
		tol  float64
		want Demand
	}{
		{"exact maximum: 2 CPUs needs 20 GB", 0, Demand{2, 20}},
		{"10% slack: 2 CPUs and 10 GB suffice", 0.1, Demand{2, 10}},
		{"50% slack: 1 CPU and 10 GB suffice", 0.5, Demand{1, 10}},
		{"negative tolerance is clamped to 0", -1, Demand{2, 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got, _ := p.BestCase(c.tol); got != c.want {
				t.Fatalf("BestCase(%v) = %+v, want %+v", c.tol, got, c.want)
			}
		})
	}
}
