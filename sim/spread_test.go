package sim

import (
	"testing"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Two long jobs share two GPUs in the last queue; six short jobs arrive
// one after another, each preempting one of them. Lowest-ranked first
// always takes the later entrant of the queue (its rank never changes);
// spread victims alternate, so neither long job collects every requeue.
func TestSpreadVictims_AlternatesBetweenLongJobs(t *testing.T) {
	tr := &Trace{Name: "spread", Jobs: []Job{
		{ID: 1, Submit: 0, GPUs: 1, Duration: 100000},
		{ID: 2, Submit: 10, GPUs: 1, Duration: 100000},
	}}
	for k := range 6 {
		tr.Jobs = append(tr.Jobs, Job{ID: uint32(3 + k), Submit: float64(2000 * (k + 1)), GPUs: 1, Duration: 500})
	}
	if err := tr.Normalise(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		spread       bool
		want1, want2 int
	}{
		{"lowest-ranked first requeues the later entrant every time", false, 0, 6},
		{"spread victims requeue each long job three times", true, 3, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 2, GPUCountOnly: true}
			cfg.Policy = PolicyLAS
			cfg.PolicyOptions.Tiresias.FixThresholds([]float64{100})
			cfg.PolicyOptions.Tiresias.PromoteKnob = 0
			cfg.PolicyOptions.Tiresias.Preemption = priority.Preemption{MinRun: 600, QueueGap: 1, SpreadVictims: c.spread}
			cfg.RecordRuns = true
			r := runOK(t, cfg, tr)
			checkInvariants(t, tr, cfg, r)
			got := map[uint32]int{}
			for _, j := range r.Jobs {
				got[j.ID] = j.Preemptions
			}
			if got[1] != c.want1 || got[2] != c.want2 {
				t.Fatalf("requeues of the long jobs = %d and %d, want %d and %d", got[1], got[2], c.want1, c.want2)
			}
			if r.Summary.Preemptions != 6 {
				t.Fatalf("%d preemptions, want 6 (one per short job)", r.Summary.Preemptions)
			}
		})
	}
}

// The summary's per-job percentiles are those of jobs.csv's column.
func TestSummary_PerJobPreemptionPercentiles(t *testing.T) {
	r := &Result{Shape: oneGPU()}
	for i := range 100 {
		p := 0
		if i >= 50 {
			p = 1
		}
		if i == 99 {
			p = 40
		}
		r.Jobs = append(r.Jobs, JobResult{ID: uint32(i), Submit: 0, Finish: 1, JCT: 1, Preemptions: p})
	}
	s := summarise(r, 0, 90)
	if s.PreemptionsPerJob != 0.9 || s.PreemptionsP50 != 0 || s.PreemptionsP99 != 1 {
		t.Fatalf("per job %v, p50 %v, p99 %v; want 0.9, 0 and 1 (the 99th of 100 values)",
			s.PreemptionsPerJob, s.PreemptionsP50, s.PreemptionsP99)
	}
}
