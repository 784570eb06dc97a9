package priority

import (
	"math"
	"testing"
)

const now int64 = 1000

// testConfig has K=3 queues at 10 and 20 GPU-seconds, so cases stay small.
// testConfig is the defaults made small and hand-computable: LAS mode, no
// promotion (tests that want Gittins or promotion set them).
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Mode = ModeLAS
	cfg.PromoteKnob = 0
	cfg.FixThresholds([]float64{10, 20})
	cfg.MaxAge = 100
	return cfg
}

func mustRanker(t testing.TB, cfg Config, dist *Distribution) *Ranker {
	t.Helper()
	r, err := NewRanker(cfg, dist)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func byID(results []Result) map[uint32]Result {
	m := make(map[uint32]Result, len(results))
	for _, res := range results {
		m[res.ID] = res
	}
	return m
}

// placed is the part of a Result the ordering tests pin down.
type placed struct {
	id       uint32
	queue    int
	entry    int64
	rank     int
	promoted bool
}

func checkPlaced(t *testing.T, got []Result, jobs []Job, want []placed) {
	t.Helper()
	if len(got) != len(jobs) {
		t.Fatalf("got %d results for %d jobs", len(got), len(jobs))
	}
	for i := range jobs {
		if got[i].ID != jobs[i].ID {
			t.Fatalf("result %d is job %d, want job %d: results must follow input order", i, got[i].ID, jobs[i].ID)
		}
	}
	m := byID(got)
	for _, w := range want {
		g := m[w.id]
		if g.Queue != w.queue || g.QueueEntry != w.entry || g.Rank != w.rank || g.Promoted != w.promoted {
			t.Errorf("job %d: got queue %d entry %d rank %d promoted %v; want queue %d entry %d rank %d promoted %v",
				w.id, g.Queue, g.QueueEntry, g.Rank, g.Promoted, w.queue, w.entry, w.rank, w.promoted)
		}
	}
}

func TestRankOrderLAS(t *testing.T) {
	tests := []struct {
		name string
		jobs []Job
		want []placed
	}{
		{
			name: "new job in Q0 outranks demoted job",
			jobs: []Job{
				{ID: 2, SubmitTime: 100, Service: 15, Queue: 1, QueueEntry: 500},
				{ID: 1, SubmitTime: 900, Service: 0, Queue: 0, QueueEntry: 900},
			},
			want: []placed{{1, 0, 900, 0, false}, {2, 1, 500, 1, false}},
		},
		{
			name: "earlier queue entry wins within a queue despite more service",
			jobs: []Job{
				{ID: 1, SubmitTime: 10, Service: 12, Queue: 1, QueueEntry: 700},
				{ID: 2, SubmitTime: 20, Service: 18, Queue: 1, QueueEntry: 600},
			},
			want: []placed{{2, 1, 600, 0, false}, {1, 1, 700, 1, false}},
		},
		{
			name: "equal queue entry: earlier submit wins over lower id",
			jobs: []Job{
				{ID: 1, SubmitTime: 50, Service: 12, Queue: 1, QueueEntry: 600},
				{ID: 2, SubmitTime: 40, Service: 12, Queue: 1, QueueEntry: 600},
			},
			want: []placed{{2, 1, 600, 0, false}, {1, 1, 600, 1, false}},
		},
		{
			name: "equal entry and submit: lower id wins",
			jobs: []Job{
				{ID: 7, SubmitTime: 50, Queue: 0, QueueEntry: 600},
				{ID: 3, SubmitTime: 50, Queue: 0, QueueEntry: 600},
			},
			want: []placed{{3, 0, 600, 0, false}, {7, 0, 600, 1, false}},
		},
		{
			name: "service exactly at a threshold moves the job down and stamps entry now",
			jobs: []Job{
				{ID: 1, SubmitTime: 100, Service: 10, Queue: 0, QueueEntry: 100},
				{ID: 2, SubmitTime: 200, Service: 20, Queue: 1, QueueEntry: 300},
			},
			want: []placed{{1, 1, now, 0, false}, {2, 2, now, 1, false}},
		},
		{
			name: "job crossing into a queue goes behind jobs already there",
			jobs: []Job{
				{ID: 1, SubmitTime: 100, Service: 10, Queue: 0, QueueEntry: 100},
				{ID: 2, SubmitTime: 800, Service: 11, Queue: 1, QueueEntry: 900},
			},
			want: []placed{{2, 1, 900, 0, false}, {1, 1, now, 1, false}},
		},
		{
			name: "job staying in its queue keeps its queue entry",
			jobs: []Job{
				{ID: 1, SubmitTime: 100, Service: 19.9, Queue: 1, QueueEntry: 400},
			},
			want: []placed{{1, 1, 400, 0, false}},
		},
		{
			name: "computed queue above the previous one counts as a change",
			jobs: []Job{
				{ID: 1, SubmitTime: 100, Service: 5, Queue: 2, QueueEntry: 100},
				{ID: 2, SubmitTime: 900, Service: 0, Queue: 0, QueueEntry: 999},
			},
			want: []placed{{2, 0, 999, 0, false}, {1, 0, now, 1, false}},
		},
		{
			name: "running and pending jobs share one order",
			jobs: []Job{
				{ID: 1, State: Pending, SubmitTime: 600, Queue: 0, QueueEntry: 600},
				{ID: 2, State: Running, SubmitTime: 500, Queue: 0, QueueEntry: 500},
				{ID: 3, State: Running, SubmitTime: 10, Service: 25, Queue: 2, QueueEntry: 50},
			},
			want: []placed{{2, 0, 500, 0, false}, {1, 0, 600, 1, false}, {3, 2, 50, 2, false}},
		},
		{
			// A copy chained behind job 4 (--dependency), submitted
			// first: it stands behind every job of its queue that can
			// start, above the next queue, and keeps its entry.
			name: "a job that cannot start yet goes last in its queue",
			jobs: []Job{
				{ID: 1, State: Pending, SubmitTime: 100, Queue: 0, QueueEntry: 100, Deferred: true},
				{ID: 2, State: Pending, SubmitTime: 600, Queue: 0, QueueEntry: 600},
				{ID: 3, State: Running, SubmitTime: 700, Queue: 0, QueueEntry: 700},
				{ID: 4, State: Running, SubmitTime: 90, Service: 15, Queue: 1, QueueEntry: 90},
			},
			want: []placed{{2, 0, 600, 0, false}, {3, 0, 700, 1, false}, {1, 0, 100, 2, false}, {4, 1, 90, 3, false}},
		},
		{
			name: "jobs that cannot start yet keep their order among themselves",
			jobs: []Job{
				{ID: 1, State: Pending, SubmitTime: 200, Queue: 0, QueueEntry: 200, Deferred: true},
				{ID: 2, State: Pending, SubmitTime: 100, Queue: 0, QueueEntry: 100, Deferred: true},
				{ID: 3, State: Pending, SubmitTime: 900, Queue: 0, QueueEntry: 900},
			},
			want: []placed{{3, 0, 900, 0, false}, {2, 0, 100, 1, false}, {1, 0, 200, 2, false}},
		},
	}
	r := mustRanker(t, testConfig(), nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkPlaced(t, r.Rank(now, tc.jobs, nil), tc.jobs, tc.want)
		})
	}
}

func TestRankPromotion(t *testing.T) {
	// waiting job: knob 2 × last run 100 = 200 s of waiting needed.
	waiting := func(id uint32, waitingSince int64) Job {
		return Job{ID: id, State: Pending, SubmitTime: 10, Service: 15, Queue: 1, QueueEntry: 300,
			LastRun: 100, WaitingSince: waitingSince}
	}
	tests := []struct {
		name string
		knob float64
		jobs []Job
		want []placed
	}{
		{
			name: "pending Q1 job is promoted exactly at the knob boundary",
			knob: 2,
			jobs: []Job{waiting(1, now-200)},
			want: []placed{{1, 0, now, 0, true}},
		},
		{
			name: "one second before the boundary the job is not promoted",
			knob: 2,
			jobs: []Job{waiting(1, now-199)},
			want: []placed{{1, 1, 300, 0, false}},
		},
		{
			name: "fractional knob is promoted at 1.5 x last run",
			knob: 1.5,
			jobs: []Job{
				waiting(1, now-150),
				waiting(2, now-149),
			},
			want: []placed{{1, 0, now, 0, true}, {2, 1, 300, 1, false}},
		},
		{
			name: "running job is never promoted",
			knob: 2,
			jobs: []Job{func() Job { j := waiting(1, 0); j.State = Running; return j }()},
			want: []placed{{1, 1, 300, 0, false}},
		},
		{
			name: "Q0 job is never promoted and keeps its entry",
			knob: 2,
			jobs: []Job{func() Job { j := waiting(1, 0); j.Service, j.Queue = 5, 0; return j }()},
			want: []placed{{1, 0, 300, 0, false}},
		},
		{
			name: "job that never ran is never promoted",
			knob: 2,
			jobs: []Job{func() Job { j := waiting(1, 0); j.LastRun = 0; return j }()},
			want: []placed{{1, 1, 300, 0, false}},
		},
		{
			name: "knob 0 disables promotion",
			knob: 0,
			jobs: []Job{waiting(1, 0)},
			want: []placed{{1, 1, 300, 0, false}},
		},
		{
			name: "promoted job ignores its service and joins Q0 behind earlier entries",
			knob: 2,
			jobs: []Job{
				func() Job { j := waiting(1, 0); j.Service, j.Queue = 1e9, 2; return j }(),
				{ID: 2, SubmitTime: 990, Queue: 0, QueueEntry: 990},
				{ID: 3, SubmitTime: 5, Service: 12, Queue: 1, QueueEntry: 5},
			},
			want: []placed{{2, 0, 990, 0, false}, {1, 0, now, 1, true}, {3, 1, 5, 2, false}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.PromoteKnob = tc.knob
			r := mustRanker(t, cfg, nil)
			checkPlaced(t, r.Rank(now, tc.jobs, nil), tc.jobs, tc.want)
		})
	}
}

// TestRankFactorsByHand: K=3, Q0 holds two jobs and Q1 one.
// Tiresias = ((K−1−q) + (n_q − pos)/(n_q + 1)) / K:
//
//	job 2, Q0 pos 0 of 2: (2 + 2/3)/3 = 8/9 → round(1e8·8/9) = 88888889
//	job 1, Q0 pos 1 of 2: (2 + 1/3)/3 = 7/9 → round(1e8·7/9) = 77777778
//	job 3, Q1 pos 0 of 1: (1 + 1/2)/3 = 1/2 → 50000000
func TestRankFactorsByHand(t *testing.T) {
	jobs := []Job{
		{ID: 1, SubmitTime: 100, Queue: 0, QueueEntry: 100},
		{ID: 2, SubmitTime: 50, Service: 5, Queue: 0, QueueEntry: 50},
		{ID: 3, SubmitTime: 10, Service: 15, Queue: 1, QueueEntry: 40},
	}
	want := map[uint32]struct {
		tiresias float64
		priority uint32
	}{
		1: {7.0 / 9, 77777778},
		2: {8.0 / 9, 88888889},
		3: {0.5, 50000000},
	}
	got := byID(mustRanker(t, testConfig(), nil).Rank(now, jobs, nil))
	for id, w := range want {
		g := got[id]
		if math.Abs(g.Factors.Tiresias-w.tiresias) > 1e-15 || g.Priority != w.priority {
			t.Errorf("job %d: tiresias %v priority %d, want %v %d", id, g.Factors.Tiresias, g.Priority, w.tiresias, w.priority)
		}
	}
}

func TestRankOtherFactors(t *testing.T) {
	tests := []struct {
		name string
		job  Job
		want Factors // Tiresias is not compared
	}{
		{"eligible half of max age ago gives age 0.5",
			Job{ID: 1, EligibleTime: now - 50}, Factors{Age: 0.5}},
		{"eligible time 0 gives age 0",
			Job{ID: 1, EligibleTime: 0}, Factors{}},
		{"eligible in the future gives age 0",
			Job{ID: 1, EligibleTime: now + 50}, Factors{}},
		{"eligible long ago caps age at 1",
			Job{ID: 1, EligibleTime: 1}, Factors{Age: 1}},
		{"partition and qos inside [0,1] pass through",
			Job{ID: 1, Partition: 0.25, QOS: 0.75}, Factors{Partition: 0.25, QOS: 0.75}},
		{"partition above 1 and negative qos are clamped",
			Job{ID: 1, Partition: 1.5, QOS: -0.2}, Factors{Partition: 1}},
		{"NaN partition counts as 0",
			Job{ID: 1, Partition: math.NaN(), QOS: 1}, Factors{QOS: 1}},
		{"nice is carried as is",
			Job{ID: 1, Nice: -42}, Factors{Nice: -42}},
	}
	r := mustRanker(t, testConfig(), SeedDistribution())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Rank(now, []Job{tc.job}, nil)[0].Factors
			got.Tiresias = 0
			if got != tc.want {
				t.Errorf("factors %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPriorityClampingAndNice(t *testing.T) {
	// One Q0 job alone: Tiresias factor (2 + 1/2)/3 = 5/6.
	tests := []struct {
		name    string
		weights Weights
		nice    int32
		service float64
		want    uint32
	}{
		{"tiresias weight 6 on factor 5/6 gives 5", Weights{Tiresias: 6}, 0, 0, 5},
		{"nice 2 lowers the priority by 2", Weights{Tiresias: 6}, 2, 0, 3},
		{"negative nice raises the priority", Weights{Tiresias: 6}, -10, 0, 15},
		{"all-zero weights give 1, never 0", Weights{}, 0, 0, 1},
		{"nice beyond the priority clamps to 1", Weights{Tiresias: 6}, 1 << 30, 0, 1},
		{"negative nice cannot pass 0xFFFFFFFE", Weights{Tiresias: 4e9}, -(1 << 31), 0, 0xFFFFFFFE},
		{"largest weight without nice stays below the cap", Weights{Tiresias: 4e9}, 0, 0, 3333333333},
		{"half-way value rounds away from zero", Weights{Age: 3}, 0, 0, 2}, // 3 × 0.5 age = 1.5
		{"age weight adds to the priority", Weights{Tiresias: 6, Age: 10}, 0, 0, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Weights = tc.weights
			r := mustRanker(t, cfg, nil)
			job := Job{ID: 1, Service: tc.service, Nice: tc.nice, EligibleTime: now - 50}
			got := r.Rank(now, []Job{job}, nil)[0].Priority
			if got != tc.want {
				t.Errorf("priority %d, want %d", got, tc.want)
			}
		})
	}
}

func TestStanding(t *testing.T) {
	r := mustRanker(t, testConfig(), nil)
	tests := []struct {
		name      string
		job       Job
		wantQueue int
		wantEntry int64
		wantTir   float64
	}{
		{"new job is placed at the bottom of Q0",
			Job{ID: 9, SubmitTime: now, QueueEntry: 0}, 0, now, 2.0 / 3},
		{"job with a recorded entry in the same queue keeps it",
			Job{ID: 9, Service: 12, Queue: 1, QueueEntry: 400}, 1, 400, 1.0 / 3},
		{"job whose service moved it to another queue enters now",
			Job{ID: 9, Service: 12, Queue: 0, QueueEntry: 400}, 1, now, 1.0 / 3},
		{"job placed in the last queue has factor 0 and priority 1",
			Job{ID: 9, Service: 25, Queue: 2, QueueEntry: 400}, 2, 400, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Standing(now, tc.job)
			if got.Queue != tc.wantQueue || got.QueueEntry != tc.wantEntry || got.Factors.Tiresias != tc.wantTir ||
				got.Rank != -1 || got.Promoted || got.ID != tc.job.ID {
				t.Errorf("Standing = %+v, want queue %d entry %d tiresias %v rank -1", got, tc.wantQueue, tc.wantEntry, tc.wantTir)
			}
			if tc.wantTir == 0 && got.Priority != 1 {
				t.Errorf("priority %d, want 1", got.Priority)
			}
		})
	}
}

func TestStandingDoesNotPromote(t *testing.T) {
	cfg := testConfig()
	cfg.PromoteKnob = 1
	r := mustRanker(t, cfg, nil)
	job := Job{ID: 1, Service: 15, Queue: 1, QueueEntry: 10, LastRun: 1, WaitingSince: 1}
	if got := r.Standing(now, job); got.Promoted || got.Queue != 1 {
		t.Fatalf("Standing promoted a starving job: %+v", got)
	}
}

// TestStandingSitsBetweenBands checks that a placed job lands strictly below
// every ranked job of its queue and strictly above the next queue, and that
// the next pass agrees it is last in its queue.
func TestStandingSitsBetweenBands(t *testing.T) {
	jobs := []Job{
		{ID: 1, Queue: 0, QueueEntry: 100},
		{ID: 2, Queue: 0, QueueEntry: 200},
		{ID: 3, Service: 11, Queue: 1, QueueEntry: 100},
		{ID: 4, Service: 12, Queue: 1, QueueEntry: 300},
		{ID: 5, Service: 13, Queue: 1, QueueEntry: 900},
		{ID: 6, Service: 30, Queue: 2, QueueEntry: 50},
		{ID: 7, Service: 31, Queue: 2, QueueEntry: 60},
	}
	for _, mode := range []Mode{ModeLAS, ModeGittins} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := testConfig()
			cfg.Mode = mode
			r := mustRanker(t, cfg, SeedDistribution())
			ranked := r.Rank(now, jobs, nil)
			newcomer := Job{ID: 8, Service: 10, Queue: 0, QueueEntry: 500}
			p := r.Standing(now, newcomer)
			if p.Queue != 1 {
				t.Fatalf("placed in queue %d, want 1", p.Queue)
			}
			for _, res := range ranked {
				switch {
				case res.Queue <= 1 && !(res.Factors.Tiresias > p.Factors.Tiresias && res.Priority > p.Priority):
					t.Errorf("job %d in Q%d (%v, %d) not above placed job (%v, %d)",
						res.ID, res.Queue, res.Factors.Tiresias, res.Priority, p.Factors.Tiresias, p.Priority)
				case res.Queue == 2 && !(res.Factors.Tiresias < p.Factors.Tiresias && res.Priority < p.Priority):
					t.Errorf("job %d in Q2 (%v, %d) not below placed job (%v, %d)",
						res.ID, res.Factors.Tiresias, res.Priority, p.Factors.Tiresias, p.Priority)
				}
			}
			if mode == ModeGittins {
				return // the index, not the entry time, decides within the queue
			}
			newcomer.Queue, newcomer.QueueEntry = p.Queue, p.QueueEntry
			next := byID(r.Rank(now, append(jobs[:len(jobs):len(jobs)], newcomer), nil))
			if next[8].Rank != 5 {
				t.Errorf("next pass ranks the placed job %d, want 5 (last of Q1)", next[8].Rank)
			}
		})
	}
}

// workedGittins is the ranker of TestRankGittinsOrder's worked example
// (S = {1,2,3,4,10}, one threshold at 5), its config changed by edit when
// not nil.
func workedGittins(t testing.TB, edit func(*Config)) *Ranker {
	t.Helper()
	dist, err := NewDistribution([]float64{1, 2, 3, 4, 10})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Mode = ModeGittins
	cfg.FixThresholds([]float64{5})
	if edit != nil {
		edit(&cfg)
	}
	return mustRanker(t, cfg, dist)
}

// TestRankGittinsOrder uses S = {1,2,3,4,10} and one threshold at 5, so Q0
// ranks with Δ = 5 and Q1 with Δ = +Inf. Worked like TestIndexByHand:
//
//	a=1.5: S>1.5 {2,3,4,10}, 3 end by 6.5, Σmin(s−a,5) = 9.5 → 6/19 ≈ 0.316
//	a=0:   all 5, 4 end by 5, Σmin(s,5) = 1+2+3+4+5 = 15 → 4/15 ≈ 0.267
//	a=2:   {3,4,10}, 2 end by 7, Σmin = 1+2+5 = 8 → 2/8 = 0.25
//	a=3.5: {4,10}, 1 ends by 8.5, Σmin = 0.5+5 = 5.5 → 2/11 ≈ 0.182
//	a=6 (Q1, Δ=∞): {10}, Σ(s−6) = 4 → 1/4
func TestRankGittinsOrder(t *testing.T) {
	r := workedGittins(t, nil)
	// Queue entries are the reverse of the index order, so FIFO alone would
	// get every position wrong.
	jobs := []Job{
		{ID: 1, Service: 0, QueueEntry: 100},
		{ID: 2, Service: 1.5, QueueEntry: 400},
		{ID: 3, Service: 2, QueueEntry: 50},
		{ID: 4, Service: 3.5, QueueEntry: 10},
		{ID: 5, Service: 0, QueueEntry: 90},
		{ID: 6, Service: 6, Queue: 1, QueueEntry: 1},
	}
	want := []struct {
		id      uint32
		rank    int
		gittins float64
	}{
		{2, 0, 6.0 / 19},
		{5, 1, 4.0 / 15}, // same index as job 1: earlier entry wins
		{1, 2, 4.0 / 15},
		{3, 3, 0.25},
		{4, 4, 2.0 / 11},
		{6, 5, 0.25},
	}
	got := byID(r.Rank(now, jobs, nil))
	for _, w := range want {
		g := got[w.id]
		if g.Rank != w.rank || math.Abs(g.Factors.Gittins-w.gittins) > 1e-12 {
			t.Errorf("job %d: rank %d gittins %.15g, want rank %d gittins %.15g", w.id, g.Rank, g.Factors.Gittins, w.rank, w.gittins)
		}
	}
}

// In Gittins mode too, a job that cannot start yet goes last in its queue,
// whatever its index: job 2 would lead queue 0 by its index (6/19).
func TestRankGittinsDeferredJobGoesLastInItsQueue(t *testing.T) {
	r := workedGittins(t, nil)
	jobs := []Job{
		{ID: 1, State: Pending, Service: 0, QueueEntry: 100},
		{ID: 2, State: Pending, Service: 1.5, QueueEntry: 400, Deferred: true},
		{ID: 3, State: Pending, Service: 2, QueueEntry: 50},
		{ID: 6, State: Pending, Service: 6, Queue: 1, QueueEntry: 1},
	}
	got := byID(r.Rank(now, jobs, nil))
	for id, rank := range map[uint32]int{1: 0, 3: 1, 2: 2, 6: 3} {
		if got[id].Rank != rank {
			t.Errorf("job %d ranked %d, want %d", id, got[id].Rank, rank)
		}
	}
}

func TestPromotedJobIndexUsesZeroService(t *testing.T) {
	r := workedGittins(t, func(c *Config) { c.PromoteKnob = 1 })
	job := Job{ID: 1, Service: 7, Queue: 1, QueueEntry: 10, LastRun: 10, WaitingSince: now - 10}
	got := r.Rank(now, []Job{job}, nil)[0]
	if !got.Promoted || math.Abs(got.Factors.Gittins-4.0/15) > 1e-12 {
		t.Fatalf("promoted job: %+v, want Promoted with index G(0,5) = 4/15", got)
	}
}

func TestLASModeReportsNoGittinsIndex(t *testing.T) {
	r := mustRanker(t, testConfig(), SeedDistribution())
	if got := r.Rank(now, []Job{{ID: 1, Service: 500}}, nil)[0].Factors.Gittins; got != 0 {
		t.Fatalf("LAS mode Gittins factor = %v, want 0", got)
	}
	if got := r.Standing(now, Job{ID: 1, Service: 500}).Factors.Gittins; got != 0 {
		t.Fatalf("LAS mode Standing Gittins factor = %v, want 0", got)
	}
}

func TestStandingFillsGittinsIndex(t *testing.T) {
	cfg := testConfig()
	cfg.Mode = ModeGittins
	r := mustRanker(t, cfg, SeedDistribution())
	job := Job{ID: 1, Service: 110, Queue: 2}
	want := SeedDistribution().Index(110, math.Inf(1))
	if got := r.Standing(now, job).Factors.Gittins; got != want || want == 0 {
		t.Fatalf("Standing Gittins factor = %v, want G(110, +Inf) = %v", got, want)
	}
}

func TestRankEmptyAndReuse(t *testing.T) {
	r := mustRanker(t, testConfig(), nil)
	if got := r.Rank(now, nil, nil); len(got) != 0 {
		t.Fatalf("Rank(nil) = %v, want empty", got)
	}
	out := r.Rank(now, []Job{{ID: 1}, {ID: 2}, {ID: 3}}, nil)
	out = r.Rank(now, []Job{{ID: 4}}, out)
	if len(out) != 1 || out[0].ID != 4 || out[0].Rank != 0 {
		t.Fatalf("reused out: %+v", out)
	}
}

func TestRankSteadyStateDoesNotAllocate(t *testing.T) {
	for _, mode := range []Mode{ModeLAS, ModeGittins} {
		cfg := DefaultConfig()
		cfg.Mode = mode
		cfg.PromoteKnob = 2
		r := mustRanker(t, cfg, SeedDistribution())
		jobs := benchJobs(2000, cfg)
		out := r.Rank(benchNow, jobs, nil)
		allocs := testing.AllocsPerRun(20, func() { out = r.Rank(benchNow, jobs, out) })
		if allocs != 0 {
			t.Errorf("%s: %v allocations per steady-state pass, want 0", mode, allocs)
		}
	}
}
