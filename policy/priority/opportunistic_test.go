package priority

import (
	"errors"
	"slices"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

func TestStrictOpportunisticPreemption(t *testing.T) {
	rule := Preemption{MinRun: 600, MaxPerJob: 3, QueueGap: 2, StrictOpportunistic: true}
	guaranteed := func(q int) Candidate { return Candidate{Queue: q, RunSeconds: 3600} }
	opp := func(q int) Candidate { return Candidate{Queue: q, RunSeconds: 3600, Opportunistic: true} }
	cases := []struct {
		name              string
		preemptor, victim Candidate
		want              Verdict
	}{
		{"opportunistic job does not preempt a guaranteed job in a lower queue", opp(0), guaranteed(3), DeniedOpportunistic},
		{"opportunistic job does not preempt an opportunistic job in a lower queue", opp(0), opp(3), DeniedOpportunistic},
		{"guaranteed job in the last queue preempts an opportunistic job in queue 0", guaranteed(3), opp(0), Allowed},
		{"guaranteed job preempts an opportunistic job of its own queue", guaranteed(1), opp(1), Allowed},
		{"opportunistic victim is preempted one second into its run", guaranteed(0), Candidate{Queue: 2, RunSeconds: 1, Opportunistic: true}, Allowed},
		{"opportunistic victim is preempted past the preemption budget", guaranteed(0), Candidate{Queue: 2, RunSeconds: 3600, Preemptions: 50, Opportunistic: true}, Allowed},
		{"promoted guaranteed job preempts an opportunistic job", Candidate{Promoted: true}, opp(2), Allowed},
		{"opportunistic victim of a higher partition tier is kept", Candidate{Tier: 1}, Candidate{Tier: 5, Opportunistic: true}, DeniedTier},
		{"opportunistic task of the preemptor's own array is kept", Candidate{Array: 9}, Candidate{Array: 9, Opportunistic: true}, DeniedSameArray},
		{"guaranteed jobs between themselves keep the queue rule", guaranteed(0), guaranteed(1), DeniedQueueGap},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := rule.Decide(c.preemptor, c.victim); got != c.want {
				t.Fatalf("Decide = %v, want %v", got, c.want)
			}
		})
	}
}

func TestStrictOpportunisticVictimsGoFirst(t *testing.T) {
	rule := DefaultPreemption()
	rule.StrictOpportunistic = true
	var floor PreemptionFloor
	// Guaranteed jobs in the last queue, requeued never, and opportunistic
	// ones in queue 0, requeued often: the opportunistic ones go first.
	victims := []Victim{
		{Queue: 3, Rank: 9},
		{Queue: 0, Rank: 1, Preemptions: 7, Opportunistic: true},
		{Queue: 2, Rank: 5, NoRequeue: false},
		{Queue: 1, Rank: 2, Opportunistic: true},
	}
	for _, v := range victims {
		if !v.Opportunistic {
			floor.Add(v.Queue, v.Preemptions)
		}
	}
	slices.SortFunc(victims, func(a, b Victim) int { return rule.CompareVictims(&floor, a, b) })
	got := make([]int, len(victims))
	for i, v := range victims {
		got[i] = v.Rank
	}
	// Opportunistic: lower queue first (rank 2 in queue 1, then rank 1 in
	// queue 0); then guaranteed by queue.
	if want := []int{2, 1, 9, 5}; !slices.Equal(got, want) {
		t.Fatalf("victim order by rank = %v, want %v", got, want)
	}
}

func TestStrictOpportunisticRanking(t *testing.T) {
	cfg := testConfig()
	cfg.Opportunistic = Opportunistic{Enabled: true, Rules: sharing.Config{PromoteAfter: 300, StrictOpportunistic: true}}
	r := mustRanker(t, cfg, nil)
	jobs := []Job{
		// Guaranteed, last queue (service 25 ≥ 20), waiting since long.
		{ID: 1, State: Pending, SubmitTime: 1, Service: 25, Queue: 2, QueueEntry: 1, WaitingSince: now - 100},
		// Opportunistic, queue 0, fresh: still below job 1.
		{ID: 2, State: Pending, SubmitTime: 2, Service: 0, QueueEntry: 2, WaitingSince: now - 100, Opportunistic: true},
		// Opportunistic that waited promote_after: upgraded, ranked with
		// the guaranteed jobs of queue 0.
		{ID: 3, State: Pending, SubmitTime: 3, Service: 0, QueueEntry: 3, WaitingSince: now - 300, Opportunistic: true},
		// Opportunistic that runs: never upgraded, however long ago it waited.
		{ID: 4, State: Running, SubmitTime: 4, Service: 5, QueueEntry: 4, WaitingSince: 0, Opportunistic: true, GPUs: 1},
		// Opportunistic one second short of promote_after.
		{ID: 5, State: Pending, SubmitTime: 5, Service: 0, QueueEntry: 5, WaitingSince: now - 299, Opportunistic: true},
	}
	res := byID(r.Rank(now, jobs, nil))
	t.Run("an opportunistic job in queue 0 ranks below a guaranteed job in the last queue", func(t *testing.T) {
		if !(res[2].Priority < res[1].Priority) || !(res[2].Rank > res[1].Rank) {
			t.Fatalf("opportunistic %+v not below guaranteed %+v", res[2], res[1])
		}
		if !res[2].Opportunistic || res[1].Opportunistic {
			t.Fatalf("classes: job 2 %v, job 1 %v", res[2].Opportunistic, res[1].Opportunistic)
		}
	})
	t.Run("an opportunistic job that waited promote_after is upgraded and ranks as guaranteed", func(t *testing.T) {
		if !res[3].Upgraded || res[3].Opportunistic || res[3].Rank != 0 || res[3].QueueEntry != now {
			t.Fatalf("job 3: %+v", res[3])
		}
	})
	t.Run("a running opportunistic job is not upgraded", func(t *testing.T) {
		if res[4].Upgraded || !res[4].Opportunistic {
			t.Fatalf("job 4: %+v", res[4])
		}
	})
	t.Run("an opportunistic job one second short of promote_after is not upgraded", func(t *testing.T) {
		if res[5].Upgraded || !res[5].Opportunistic {
			t.Fatalf("job 5: %+v", res[5])
		}
	})
	t.Run("the upgrade is kept for good by the account", func(t *testing.T) {
		a := NewAccount(0)
		a.Apply(now, res[3])
		a.Apply(now+10, Result{ID: 3}) // a later pass no longer reports it
		if a.Upgraded != now || a.Opportunistic(true) {
			t.Fatalf("Upgraded = %d, Opportunistic = %v", a.Upgraded, a.Opportunistic(true))
		}
	})
	t.Run("no upgrade while a guaranteed GPU job waits; a held one or one not yet eligible holds none back", func(t *testing.T) {
		waiting := Job{ID: 6, State: Pending, GPUs: 1, SubmitTime: 6, QueueEntry: 6, WaitingSince: now - 10}
		cases := []struct {
			name    string
			tweak   func(*Job)
			upgrade bool
		}{
			{"a guaranteed GPU job waits: none", func(*Job) {}, false},
			{"it is held: upgraded", func(j *Job) { j.Held = true }, true},
			{"its begin time is ahead: upgraded", func(j *Job) { j.EligibleTime = now + 60 }, true},
			{"it runs: upgraded", func(j *Job) { j.State = Running }, true},
			{"it wants no GPU: upgraded", func(j *Job) { j.GPUs = 0 }, true},
		}
		for _, tc := range cases {
			g := waiting
			tc.tweak(&g)
			got := byID(r.Rank(now, append(append([]Job(nil), jobs...), g), nil))
			if got[3].Upgraded != tc.upgrade || got[3].Opportunistic == tc.upgrade {
				t.Errorf("%s: job 3 %+v", tc.name, got[3])
			}
		}
	})
	t.Run("promote_after 0 never upgrades", func(t *testing.T) {
		c := cfg
		c.Opportunistic.Rules.PromoteAfter = 0
		got := byID(mustRanker(t, c, nil).Rank(now, jobs, nil))
		if got[3].Upgraded || !got[3].Opportunistic {
			t.Fatalf("job 3: %+v", got[3])
		}
	})
	t.Run("standing puts a new opportunistic job below every guaranteed queue", func(t *testing.T) {
		opp := r.Standing(now, Job{ID: 9, Opportunistic: true})
		last := r.Standing(now, Job{ID: 10, Service: 25})
		if !(opp.Priority < last.Priority) || !opp.Opportunistic {
			t.Fatalf("opportunistic standing %+v, guaranteed last queue %+v", opp, last)
		}
	})
	t.Run("without the class an opportunistic flag changes nothing", func(t *testing.T) {
		plain := byID(mustRanker(t, testConfig(), nil).Rank(now, jobs, nil))
		if plain[2].Opportunistic || !(plain[2].Priority > plain[1].Priority) {
			t.Fatalf("job 2 %+v vs job 1 %+v", plain[2], plain[1])
		}
	})
}

func TestOpportunisticValidate(t *testing.T) {
	for _, v := range []float64{-1, MaxPromoteAfter + 1} {
		err := Opportunistic{Enabled: true, Rules: sharing.Config{PromoteAfter: v}}.Validate()
		var ke *configerr.KeyError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ke) || ke.Key != "promote_after" {
			t.Errorf("promote_after %v: err %v", v, err)
		}
	}
	if err := (Opportunistic{Enabled: true, Rules: sharing.Config{PromoteAfter: 3600}}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestStrictAWaitingOpportunisticJobWithABetterPairGoesFirstInItsQueue(t *testing.T) {
	cfg := testConfig()
	cfg.Opportunistic = Opportunistic{Enabled: true, Rules: sharing.Config{PromoteAfter: 3600, StrictOpportunistic: true}}
	r := mustRanker(t, cfg, nil)
	jobs := []Job{
		// Guaranteed, queue 0: a pair score on it decides nothing.
		{ID: 1, State: Pending, SubmitTime: 1, QueueEntry: 1, WaitingSince: now - 10, Pair: 0.1},
		{ID: 2, State: Pending, SubmitTime: 2, QueueEntry: 2, WaitingSince: now - 10, Pair: 0.9},
		// Opportunistic, queue 0: the older one is predicted to slow its
		// neighbour to 0.6 of alone, the younger one to 0.97.
		{ID: 3, State: Pending, SubmitTime: 3, QueueEntry: 3, WaitingSince: now - 10, Opportunistic: true, Pair: 0.6},
		{ID: 4, State: Pending, SubmitTime: 4, QueueEntry: 4, WaitingSince: now - 10, Opportunistic: true, Pair: 0.97},
		// Opportunistic without a prediction: after both.
		{ID: 5, State: Pending, SubmitTime: 0, QueueEntry: 0, WaitingSince: now - 10, Opportunistic: true},
	}
	res := byID(r.Rank(now, jobs, nil))
	if !(res[4].Rank < res[3].Rank && res[3].Rank < res[5].Rank) {
		t.Fatalf("ranks: job 4 %d, job 3 %d, job 5 %d; want the better pair first, the unpredicted last", res[4].Rank, res[3].Rank, res[5].Rank)
	}
	if res[4].Factors.Pair != 0.97 || res[5].Factors.Pair != 0 {
		t.Fatalf("pair factors %v %v, want the score recorded", res[4].Factors.Pair, res[5].Factors.Pair)
	}
	if !(res[1].Rank < res[2].Rank) || res[1].Factors.Pair != 0 {
		t.Fatalf("guaranteed jobs reordered by a pair score: %+v %+v", res[1], res[2])
	}
}

// The default rule (sharing.Config.StrictOpportunistic off): an
// opportunistic job is ranked among all jobs by attained service, evicted
// only by a guaranteed job of a better queue, the least run
// first, and upgraded after promote_after even while guaranteed jobs wait.
func TestOpportunisticJobsCompeteByAttainedService(t *testing.T) {
	cfg := testConfig()
	cfg.Opportunistic = Opportunistic{Enabled: true, Rules: sharing.Config{PromoteAfter: 300}}
	r := mustRanker(t, cfg, nil)
	jobs := []Job{
		// Guaranteed, last queue (service 25 ≥ 20), waiting since long.
		{ID: 1, State: Pending, GPUs: 1, SubmitTime: 1, Service: 25, Queue: 2, QueueEntry: 1, WaitingSince: now - 100},
		// Opportunistic, queue 0, fresh.
		{ID: 2, State: Pending, GPUs: 1, SubmitTime: 2, Service: 0, QueueEntry: 2, WaitingSince: now - 100, Opportunistic: true, Pair: 0.99},
		// Opportunistic that waited promote_after, while job 1 and job 6 wait.
		{ID: 3, State: Pending, GPUs: 1, SubmitTime: 3, Service: 0, QueueEntry: 3, WaitingSince: now - 300, Opportunistic: true},
		// Opportunistic in queue 1 (service 12).
		{ID: 4, State: Pending, GPUs: 1, SubmitTime: 4, Service: 12, Queue: 1, QueueEntry: 4, WaitingSince: now - 100, Opportunistic: true},
		// Guaranteed, queue 0, submitted after job 2.
		{ID: 6, State: Pending, GPUs: 1, SubmitTime: 6, Service: 0, QueueEntry: 6, WaitingSince: now - 10},
	}
	res := byID(r.Rank(now, jobs, nil))
	rankCases := []struct {
		name string
		ok   bool
	}{
		{"an opportunistic job in queue 0 ranks above a guaranteed job in the last queue",
			res[2].Rank < res[1].Rank && res[2].Priority > res[1].Priority && res[2].Opportunistic},
		{"an opportunistic job in queue 1 ranks above a guaranteed job in the last queue and below a guaranteed one in queue 0",
			res[4].Rank < res[1].Rank && res[4].Rank > res[6].Rank},
		{"in one queue, an opportunistic job keeps its place by queue entry ahead of a later guaranteed job (its pair score jumps no one)",
			res[2].Rank < res[6].Rank && res[2].Factors.Pair == 0.99},
		{"an opportunistic job that waited promote_after is upgraded while guaranteed jobs wait",
			res[3].Upgraded && !res[3].Opportunistic},
		{"the upgraded job keeps its place: its queue entry stays",
			res[3].QueueEntry == 3 && res[3].Rank < res[6].Rank},
	}
	for _, c := range rankCases {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatalf("results: %+v", res)
			}
		})
	}
	t.Run("standing puts a new opportunistic job in queue 0 with guaranteed jobs", func(t *testing.T) {
		opp := r.Standing(now, Job{ID: 9, Opportunistic: true})
		g := r.Standing(now, Job{ID: 10})
		if opp.Priority != g.Priority || !opp.Opportunistic {
			t.Fatalf("opportunistic standing %+v, guaranteed %+v", opp, g)
		}
	})

	rule := Preemption{MinRun: 600, MaxPerJob: 3, QueueGap: 2}
	guaranteed := func(q int) Candidate { return Candidate{Queue: q, RunSeconds: 3600} }
	opp := func(q int) Candidate { return Candidate{Queue: q, RunSeconds: 3600, Opportunistic: true} }
	for _, c := range []struct {
		name              string
		preemptor, victim Candidate
		want              Verdict
	}{
		{"guaranteed job in the last queue does not evict an opportunistic job in queue 0", guaranteed(2), opp(0), DeniedQueue},
		{"guaranteed job does not evict an opportunistic job of its own queue", guaranteed(1), opp(1), DeniedQueue},
		{"guaranteed job evicts an opportunistic job one queue below, queue_gap aside", guaranteed(0), opp(1), Allowed},
		{"guaranteed job evicts an opportunistic job one second into its run, past its budget", guaranteed(0), Candidate{Queue: 1, RunSeconds: 1, Preemptions: 50, Opportunistic: true}, Allowed},
		{"opportunistic job evicts nothing", opp(0), opp(2), DeniedOpportunistic},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := rule.Decide(c.preemptor, c.victim); got != c.want {
				t.Fatalf("Decide = %v, want %v", got, c.want)
			}
		})
	}

	t.Run("of opportunistic victims the one that ran least goes first, before any guaranteed one", func(t *testing.T) {
		rule := DefaultPreemption()
		victims := []Victim{
			{Queue: 3, Rank: 9, RunSeconds: 5},
			{Queue: 2, Rank: 8, RunSeconds: 7200, Opportunistic: true},
			{Queue: 0, Rank: 1, RunSeconds: 60, Opportunistic: true},
			{Queue: 1, Rank: 2, RunSeconds: 600, Opportunistic: true},
		}
		var floor PreemptionFloor
		floor.Add(3, 0)
		slices.SortFunc(victims, func(a, b Victim) int { return rule.CompareVictims(&floor, a, b) })
		got := make([]int, len(victims))
		for i, v := range victims {
			got[i] = v.Rank
		}
		if want := []int{1, 2, 8, 9}; !slices.Equal(got, want) {
			t.Fatalf("victim order by rank = %v, want %v", got, want)
		}
	})
}
