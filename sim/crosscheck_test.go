package sim

import (
	"math"
	"testing"
)

// The Tiresias reference simulator's figures for 60_job.csv on 4 nodes × 4
// GPUs, GPU counting only (data/README.md), and what Lachesis's
// simulator gives with the same settings (K=3, thresholds 3250/7200 GPU-s,
// no promotion, demotions acted on at the second they happen). FIFO and
// 2D-LAS at ×1 agree to the reference's precision; 2D-LAS at ×20 differs
// because Lachesis preempts only across queues. With -reference-preemption
// (the reference's queue lists: running jobs ahead of waiting ones inside
// a queue, entrants at the back, every lower-ranked job preemptable, its
// late demotion wake-ups) the gap is 3%; on the busy Philly slice of issue
// 11 (6c71a0, 1,000 jobs, 32 GPUs) the same setting preempts 1,685 times
// where the reference does 1,709. See docs/evaluation.
func TestCrossCheck_SixtyJobsAgainstTheReferenceSimulator(t *testing.T) {
	base, err := LoadTrace(refData(t, "tiresias/60_job.csv"), FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		scale     float64
		policy    string
		reference bool
		want, tol float64
	}{
		{"fifo ×1 matches the reference", 1, PolicyFIFO, false, 200.8, 0.05},
		{"fifo ×20 matches the reference", 20, PolicyFIFO, false, 18271.5, 0.05},
		{"2D-LAS ×1 matches the reference", 1, PolicyLAS, false, 190.7, 0.05},
		{"2D-LAS ×20 with Lachesis's preemption rule", 20, PolicyLAS, false, 15531.5, 0.05},
		{"2D-LAS ×1 with the reference's rule matches the reference", 1, PolicyLAS, true, 190.7, 0.05},
		{"2D-LAS ×20 with the reference's rule is within 4%", 20, PolicyLAS, true, 16241.9, 0.04 * 16241.9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := base.Select(Filter{DurationScale: c.scale})
			if err != nil {
				t.Fatal(err)
			}
			cfg := CrossCheckConfig()
			cfg.Policy = c.policy
			cfg.PolicyOptions.ReferencePreemption = c.reference
			cfg.RecordRuns = true
			r := runOK(t, cfg, tr)
			checkInvariants(t, tr, cfg, r)
			if got := r.Summary.AvgJCT; math.Abs(got-c.want) > c.tol {
				t.Fatalf("average JCT %.2f, want %.1f ± %g", got, c.want, c.tol)
			}
		})
	}
}
