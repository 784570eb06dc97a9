package priority

import (
	"errors"
	"testing"
)

func TestPreemptionDecide(t *testing.T) {
	rule := Preemption{MinRun: 600, MaxPerJob: 3, QueueGap: 1}
	fresh := Candidate{Queue: 0}
	old := Candidate{Queue: 2, RunSeconds: 3600, Requeues: 1}
	cases := []struct {
		name              string
		rule              Preemption
		preemptor, victim Candidate
		want              Verdict
	}{
		{"lower-queue victim that ran long enough is preempted", rule, fresh, old, Allowed},
		{"same-queue victim is kept", rule, Candidate{Queue: 2}, old, DeniedQueue},
		{"higher-queue victim is kept", rule, Candidate{Queue: 3}, old, DeniedQueue},
		{"victim one queue down is kept under a gap of 2", Preemption{QueueGap: 2}, Candidate{Queue: 1}, old, DeniedQueue},
		{"victim two queues down is preempted under a gap of 2", Preemption{QueueGap: 2}, fresh, old, Allowed},
		{"victim younger than min_run is kept", rule, fresh, Candidate{Queue: 2, RunSeconds: 599}, DeniedMinRun},
		{"victim that spent its budget is kept", rule, fresh, Candidate{Queue: 2, RunSeconds: 3600, Requeues: 3}, DeniedBudget},
		{"budget 0 never runs out", Preemption{QueueGap: 1}, fresh, Candidate{Queue: 2, Requeues: 1000}, Allowed},
		{"promoted preemptor takes nobody's GPUs", rule, Candidate{Queue: 0, Promoted: true}, old, DeniedPromoted},
		{"promoted preemptor preempts when allowed", Preemption{QueueGap: 1, PromotedPreempts: true}, Candidate{Promoted: true}, old, Allowed},
		{"zero gap acts as the paper's gap of 1", Preemption{}, Candidate{Queue: 1}, Candidate{Queue: 1}, DeniedQueue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.rule.Decide(c.preemptor, c.victim); got != c.want {
				t.Fatalf("Decide = %v, want %v", got, c.want)
			}
		})
	}
}

func TestAccountCandidate_CountsRequeuesAndPromotion(t *testing.T) {
	a := NewAccount(0)
	a.StartRun(0, 2)
	a.ObserveRun(0, 2, 100)
	a.Requeued(100)
	a.StartRun(200, 2)
	c := a.Candidate(1, 50)
	if c.Requeues != 1 || c.Promoted || c.Queue != 1 || c.RunSeconds != 50 {
		t.Fatalf("candidate %+v, want 1 requeue, not promoted, queue 1, 50 s", c)
	}
	a.Apply(300, Result{Queue: 0, Promoted: true})
	if !a.Candidate(0, 0).Promoted {
		t.Fatal("promoted account not described as promoted")
	}
}

func TestValidate_RejectsBadPreemptionKeys(t *testing.T) {
	cases := []struct {
		name string
		p    Preemption
		key  string
	}{
		{"negative min_run is rejected", Preemption{MinRun: -1, QueueGap: 1}, "preemption.min_run"},
		{"negative max_per_job is rejected", Preemption{MaxPerJob: -1, QueueGap: 1}, "preemption.max_per_job"},
		{"queue_gap 0 is rejected", Preemption{QueueGap: 0}, "preemption.queue_gap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Preemption = c.p
			err := cfg.Validate()
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != c.key || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want a KeyError for %s", err, c.key)
			}
		})
	}
}

func TestWithDistribution_PutsThresholdsAtQuantiles(t *testing.T) {
	dist, err := NewDistribution([]float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		quantiles []float64
		dist      *Distribution
		want      []float64
	}{
		{"quantiles pick samples", []float64{0.3, 0.9}, dist, []float64{30, 90}},
		{"quantiles on one sample merge", []float64{0.31, 0.35, 0.39}, dist, []float64{40}},
		{"no quantiles keep the fixed list", nil, dist, []float64{5, 6}},
		{"no distribution keeps the fixed list", []float64{0.5}, nil, []float64{5, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Thresholds, cfg.ThresholdQuantiles = []float64{5, 6}, c.quantiles
			got := cfg.WithDistribution(c.dist).Thresholds
			if len(got) != len(c.want) {
				t.Fatalf("thresholds %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("thresholds %v, want %v", got, c.want)
				}
			}
		})
	}
	r, err := NewRanker(Config{Mode: ModeLAS, Thresholds: []float64{1}, ThresholdQuantiles: []float64{0.5}, MaxAge: 1,
		Preemption: DefaultPreemption()}, dist)
	if err != nil {
		t.Fatal(err)
	}
	if th := r.Config().Thresholds; len(th) != 1 || th[0] != 50 {
		t.Fatalf("ranker thresholds %v, want [50] from the median", th)
	}
}

func TestValidate_RejectsBadQuantiles(t *testing.T) {
	cases := []struct {
		name string
		q    []float64
	}{
		{"quantile 0 is rejected", []float64{0}},
		{"quantile 1 is rejected", []float64{0.5, 1}},
		{"descending quantiles are rejected", []float64{0.6, 0.5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.ThresholdQuantiles = c.q
			var ke *KeyError
			if err := cfg.Validate(); !errors.As(err, &ke) || ke.Key != "threshold_quantiles" {
				t.Fatalf("Validate = %v, want a KeyError for threshold_quantiles", err)
			}
		})
	}
}
