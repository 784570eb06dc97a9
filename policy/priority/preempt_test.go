package priority

import (
	"errors"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

func TestPreemptionDecide(t *testing.T) {
	rule := Preemption{MinRun: 600, MaxPerJob: 3, QueueGap: 1}
	fresh := Candidate{Queue: 0}
	old := Candidate{Queue: 2, RunSeconds: 3600, Preemptions: 1}
	cases := []struct {
		name              string
		rule              Preemption
		preemptor, victim Candidate
		want              Verdict
	}{
		{"lower-queue victim that ran long enough is preempted", rule, fresh, old, Allowed},
		{"same-queue victim is kept", rule, Candidate{Queue: 2}, old, DeniedQueue},
		{"higher-queue victim is kept", rule, Candidate{Queue: 3}, old, DeniedQueue},
		{"victim one queue down is kept under a gap of 2", Preemption{QueueGap: 2}, Candidate{Queue: 1}, old, DeniedQueueGap},
		{"victim two queues down is preempted under a gap of 2", Preemption{QueueGap: 2}, fresh, old, Allowed},
		{"victim younger than min_run is kept", rule, fresh, Candidate{Queue: 2, RunSeconds: 599}, DeniedMinRun},
		{"victim that spent its budget is kept", rule, fresh, Candidate{Queue: 2, RunSeconds: 3600, Preemptions: 3}, DeniedBudget},
		{"budget 0 never runs out", Preemption{QueueGap: 1}, fresh, Candidate{Queue: 2, Preemptions: 1000}, Allowed},
		{"promoted preemptor takes nobody's GPUs", rule, Candidate{Queue: 0, Promoted: true}, old, DeniedPromoted},
		{"promoted preemptor preempts when allowed", Preemption{QueueGap: 1, PromotedPreempts: true}, Candidate{Promoted: true}, old, Allowed},
		{"zero gap acts as the paper's gap of 1", Preemption{}, Candidate{Queue: 1}, Candidate{Queue: 1}, DeniedQueue},
		{"victim of a higher partition tier is kept", rule, Candidate{Tier: 1}, Candidate{Queue: 2, RunSeconds: 3600, Tier: 10}, DeniedTier},
		{"victim of the same tier is preempted", rule, Candidate{Tier: 10}, Candidate{Queue: 2, RunSeconds: 3600, Tier: 10}, Allowed},
		{"victim of a lower tier is preempted", rule, Candidate{Tier: 10}, Candidate{Queue: 2, RunSeconds: 3600, Tier: 1}, Allowed},
		{"a higher tier does not preempt across no queue", rule, Candidate{Queue: 2, Tier: 10}, Candidate{Queue: 2, RunSeconds: 3600, Tier: 1}, DeniedQueue},
		{"task of the same array is kept", rule, Candidate{Array: 7}, Candidate{Queue: 2, RunSeconds: 3600, Array: 7}, DeniedSameArray},
		{"task of another array is preempted", rule, Candidate{Array: 7}, Candidate{Queue: 2, RunSeconds: 3600, Array: 8}, Allowed},
		{"array task preempts a plain job", rule, Candidate{Array: 7}, old, Allowed},
		{"plain job preempts an array task", rule, fresh, Candidate{Queue: 2, RunSeconds: 3600, Array: 7}, Allowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.rule.Decide(c.preemptor, c.victim); got != c.want {
				t.Fatalf("Decide = %v, want %v", got, c.want)
			}
		})
	}
}

func TestAccountCandidate_CountsPreemptionsAndPromotion(t *testing.T) {
	a := NewAccount(0)
	a.StartRun(0, 2)
	a.ObserveRun(0, 2, 100)
	a.Preempted(100)
	// A requeue the rule did not cause (the owner's own scontrol requeue)
	// is a run, not a preemption.
	a.StartRun(200, 2)
	a.ObserveRun(200, 2, 10)
	a.Requeued(210)
	a.StartRun(300, 2)
	c := a.Candidate(1, 50)
	if c.Preemptions != 1 || a.Requeues() != 2 || c.Promoted || c.Queue != 1 || c.RunSeconds != 50 {
		t.Fatalf("candidate %+v (requeues %d), want 1 preemption of 2 requeues, not promoted, queue 1, 50 s", c, a.Requeues())
	}
	if a.Preempted(400); a.Preemptions != 2 || a.RunOpen || a.WaitingSince != 400 {
		t.Fatalf("Preempted: %+v, want the run closed at 400 and a second preemption", a)
	}
	if a.Preempted(500); a.Preemptions != 2 {
		t.Fatal("Preempted counted a job with no open run")
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
			var ke *configerr.KeyError
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
			var ke *configerr.KeyError
			if err := cfg.Validate(); !errors.As(err, &ke) || ke.Key != "threshold_quantiles" {
				t.Fatalf("Validate = %v, want a KeyError for threshold_quantiles", err)
			}
		})
	}
}

func TestCompareVictims(t *testing.T) {
	var floor PreemptionFloor
	// Running jobs of the pass: queue 2 has jobs preempted 1, 3 and 1
	// times (floor 1); queue 1 has one preempted 5 times (floor 5).
	for _, v := range []Victim{{Queue: 2, Preemptions: 1}, {Queue: 2, Preemptions: 3}, {Queue: 1, Preemptions: 5}} {
		floor.Add(v.Queue, v.Preemptions)
	}
	spread := Preemption{QueueGap: 1, SpreadVictims: true}
	plain := Preemption{QueueGap: 1}
	cases := []struct {
		name string
		rule Preemption
		a, b Victim
		want int // sign: negative when a goes first
	}{
		{"lower queue goes first whatever its preemptions", spread, Victim{Queue: 2, Preemptions: 3, Rank: 1}, Victim{Queue: 1, Preemptions: 5, Rank: 9}, -1},
		{"spread: the job at its queue's floor goes before one above it", spread, Victim{Queue: 2, Preemptions: 1, Rank: 1}, Victim{Queue: 2, Preemptions: 3, Rank: 9}, -1},
		{"spread: two jobs at the floor go lowest-ranked first", spread, Victim{Queue: 2, Preemptions: 1, Rank: 1}, Victim{Queue: 2, Preemptions: 1, Rank: 9}, 1},
		{"spread: two jobs above the floor go lowest-ranked first", spread, Victim{Queue: 2, Preemptions: 2, Rank: 4}, Victim{Queue: 2, Preemptions: 7, Rank: 3}, -1},
		{"spread: the floor is per queue", spread, Victim{Queue: 1, Preemptions: 5, Rank: 2}, Victim{Queue: 1, Preemptions: 4, Rank: 3}, 1},
		{"spread: a queue with no running job has no floor", spread, Victim{Queue: 3, Preemptions: 9, Rank: 1}, Victim{Queue: 3, Preemptions: 0, Rank: 2}, 1},
		{"off: lowest-ranked first whatever the preemptions", plain, Victim{Queue: 2, Preemptions: 1, Rank: 1}, Victim{Queue: 2, Preemptions: 3, Rank: 9}, 1},
		{"a requeueable job goes before a --no-requeue one of its queue", spread, Victim{Queue: 2, Preemptions: 3, Rank: 1}, Victim{Queue: 2, Rank: 9, NoRequeue: true}, -1},
		{"a --no-requeue job of a lower queue still goes first", plain, Victim{Queue: 3, Rank: 1, NoRequeue: true}, Victim{Queue: 2, Rank: 9}, -1},
		{"two --no-requeue jobs go lowest-ranked first", plain, Victim{Queue: 2, Rank: 1, NoRequeue: true}, Victim{Queue: 2, Rank: 9, NoRequeue: true}, 1},
		{"a job compares equal to itself", spread, Victim{Queue: 2, Preemptions: 3, Rank: 4}, Victim{Queue: 2, Preemptions: 3, Rank: 4}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.rule.CompareVictims(&floor, c.a, c.b)
			if sign(got) != c.want {
				t.Fatalf("CompareVictims = %d, want sign %d", got, c.want)
			}
			if back := c.rule.CompareVictims(&floor, c.b, c.a); sign(back) != -c.want {
				t.Fatalf("CompareVictims reversed = %d, want sign %d", back, -c.want)
			}
		})
	}
}

func TestPreemptionFloor_ResetForgetsThePass(t *testing.T) {
	var f PreemptionFloor
	f.Add(2, 0)
	f.Reset()
	f.Add(2, 4)
	if f.above(Victim{Queue: 2, Preemptions: 4}) || !f.above(Victim{Queue: 2, Preemptions: 5}) {
		t.Fatal("floor after Reset is not the new pass's least requeues (4)")
	}
	f.Add(MaxThresholds+5, 1) // clamped to the last queue, not out of range
	if !f.above(Victim{Queue: MaxThresholds + 9, Preemptions: 2}) {
		t.Fatal("queues beyond the last do not share the last queue's floor")
	}
}

func sign(v int) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}
