package priority

import (
	"math/rand/v2"
	"slices"
	"testing"
)

const propertyTrials = 300

// randomPass draws a small snapshot with many ties (few distinct times and
// services, some exactly on thresholds) so that every tie-break gets used.
func randomPass(rng *rand.Rand, cfg Config) []Job {
	n := 1 + rng.IntN(40)
	ids := rng.Perm(10 * n)
	services := append([]float64{0, 1, 5}, cfg.Thresholds...)
	jobs := make([]Job, n)
	for i := range jobs {
		service := services[rng.IntN(len(services))] + float64(rng.IntN(3))*rng.Float64()*10
		queue := QueueOf(cfg, service)
		if rng.IntN(4) == 0 {
			queue = rng.IntN(cfg.Queues())
		}
		jobs[i] = Job{
			ID:           uint32(ids[i] + 1),
			State:        State(rng.IntN(2)),
			SubmitTime:   now - int64(rng.IntN(5)),
			EligibleTime: now - int64(rng.IntN(200)),
			Service:      service,
			Queue:        queue,
			QueueEntry:   now - int64(rng.IntN(5)),
			LastRun:      float64(rng.IntN(3) * 10),
			WaitingSince: now - int64(rng.IntN(40)),
		}
	}
	return jobs
}

// propertyConfigs: both modes, with and without promotion, and with Δ small
// enough that the seed-like test distribution gives varied indices.
func propertyConfigs() []Config {
	var cfgs []Config
	for _, mode := range []Mode{ModeLAS, ModeGittins} {
		for _, knob := range []float64{0, 2} {
			cfg := testConfig()
			cfg.Mode = mode
			cfg.PromoteKnob = knob
			cfgs = append(cfgs, cfg)
		}
	}
	return cfgs
}

func propertyDistribution(t *testing.T) *Distribution {
	d, err := NewDistribution([]float64{1, 2, 3, 4, 6, 8, 9, 12, 15, 21, 30, 45, 80})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestPropertyOrderIsTotalAndIgnoresInputOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	dist := propertyDistribution(t)
	for _, cfg := range propertyConfigs() {
		r := mustRanker(t, cfg, dist)
		for trial := 0; trial < propertyTrials; trial++ {
			jobs := randomPass(rng, cfg)
			first := byID(r.Rank(now, jobs, nil))

			ranks := make([]int, 0, len(jobs))
			for _, res := range first {
				ranks = append(ranks, res.Rank)
			}
			slices.Sort(ranks)
			for i, rank := range ranks {
				if rank != i {
					t.Fatalf("%s knob %v: ranks %v are not a permutation of 0..%d", cfg.Mode, cfg.PromoteKnob, ranks, len(jobs)-1)
				}
			}

			shuffled := slices.Clone(jobs)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for _, res := range r.Rank(now, shuffled, nil) {
				if res != first[res.ID] {
					t.Fatalf("%s knob %v: job %d ranked %+v after shuffling, %+v before", cfg.Mode, cfg.PromoteKnob, res.ID, res, first[res.ID])
				}
			}
		}
	}
}

func TestPropertyPriorityFollowsRankWithTiresiasWeightOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2))
	dist := propertyDistribution(t)
	for _, cfg := range propertyConfigs() {
		r := mustRanker(t, cfg, dist) // default weights: Tiresias only
		for trial := 0; trial < propertyTrials; trial++ {
			results := r.Rank(now, randomPass(rng, cfg), nil)
			slices.SortFunc(results, func(a, b Result) int { return a.Rank - b.Rank })
			for i := 1; i < len(results); i++ {
				prev, cur := results[i-1], results[i]
				if cur.Priority > prev.Priority || !(cur.Factors.Tiresias < prev.Factors.Tiresias) {
					t.Fatalf("%s: rank %d (%v, %d) above rank %d (%v, %d)", cfg.Mode,
						cur.Rank, cur.Factors.Tiresias, cur.Priority, prev.Rank, prev.Factors.Tiresias, prev.Priority)
				}
			}
		}
	}
}

// moreService reranks jobs with job i given extra service and returns the
// job's result before and after.
func moreService(r *Ranker, rng *rand.Rand, jobs []Job, i int) (before, after Result) {
	before = r.Rank(now, jobs, nil)[i]
	more := slices.Clone(jobs)
	more[i].Service += 0.5 + rng.Float64()*15
	after = r.Rank(now, more, nil)[i]
	return before, after
}

// In LAS mode a job's place within its queue depends only on its entry time,
// so extra service can only keep it where it is or push it down a queue.
func TestPropertyLASMoreServiceNeverRaisesAJob(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	for _, cfg := range propertyConfigs()[:2] {
		r := mustRanker(t, cfg, nil)
		for trial := 0; trial < propertyTrials; trial++ {
			jobs := randomPass(rng, cfg)
			i := rng.IntN(len(jobs))
			before, after := moreService(r, rng, jobs, i)
			if after.Queue < before.Queue || after.Factors.Tiresias > before.Factors.Tiresias ||
				after.Rank < before.Rank || after.Priority > before.Priority {
				t.Fatalf("knob %v: job %d rose with more service: %+v → %+v", cfg.PromoteKnob, jobs[i].ID, before, after)
			}
		}
	}
}

// In Gittins mode the index may rise with service (see the next test), so
// only the queue-level guarantee holds: more service never moves a job to a
// better queue, and a job pushed down a queue drops below its old band.
func TestPropertyGittinsMoreServiceNeverRaisesTheQueue(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 4))
	dist := propertyDistribution(t)
	for _, cfg := range propertyConfigs()[2:] {
		r := mustRanker(t, cfg, dist)
		for trial := 0; trial < propertyTrials; trial++ {
			jobs := randomPass(rng, cfg)
			i := rng.IntN(len(jobs))
			before, after := moreService(r, rng, jobs, i)
			if after.Queue < before.Queue ||
				(after.Queue > before.Queue && !(after.Factors.Tiresias < before.Factors.Tiresias)) {
				t.Fatalf("knob %v: job %d rose with more service: %+v → %+v", cfg.PromoteKnob, jobs[i].ID, before, after)
			}
		}
	}
}

// With S = {1,2,3,4,10} and Δ = 5, G(0) = 4/15 < G(1.5) = 6/19 (worked in
// TestRankGittinsOrder): a job that has run a little is likelier to finish
// soon than a fresh one, so it overtakes a fresh job in the same queue.
func TestGittinsMoreServiceCanRaiseAJobWithinItsQueue(t *testing.T) {
	r := workedGittins(t, nil)
	jobs := []Job{
		{ID: 1, Service: 0, QueueEntry: 100},
		{ID: 2, Service: 0, QueueEntry: 50},
	}
	if got := r.Rank(now, jobs, nil)[0].Rank; got != 1 {
		t.Fatalf("job 1 with no service ranks %d, want 1", got)
	}
	jobs[0].Service = 1.5
	if got := r.Rank(now, jobs, nil)[0].Rank; got != 0 {
		t.Fatalf("job 1 with 1.5 service ranks %d, want 0", got)
	}
}
