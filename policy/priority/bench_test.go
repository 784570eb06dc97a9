package priority

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/sharing"
)

const benchNow int64 = 1_700_000_000

// benchJobs is a deterministic snapshot: about 40% running, services spread
// from 0 to 1.5× the last threshold, one job in ten with a stale queue (so
// its queue entry is restamped), and wait/last-run times that let some
// pending jobs hit the promotion knob when it is enabled.
func benchJobs(n int, cfg Config) []Job {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	top := 1.0
	if len(cfg.Thresholds) > 0 {
		top = cfg.Thresholds[len(cfg.Thresholds)-1]
	}
	jobs := make([]Job, n)
	for i := range jobs {
		submit := benchNow - rng.Int64N(7*24*3600)
		service := rng.Float64() * 1.5 * top
		queue := QueueOf(cfg, service)
		if rng.IntN(10) == 0 && queue > 0 {
			queue--
		}
		state := Pending
		if rng.IntN(10) < 4 {
			state = Running
		}
		var lastRun float64
		if service > 0 {
			lastRun = float64(1 + rng.IntN(3600))
		}
		jobs[i] = Job{
			ID:           uint32(i + 1),
			State:        state,
			GPUs:         uint32(1 << rng.IntN(4)),
			SubmitTime:   submit,
			EligibleTime: submit,
			Service:      service,
			Queue:        queue,
			QueueEntry:   submit + rng.Int64N(benchNow-submit+1),
			LastRun:      lastRun,
			WaitingSince: benchNow - rng.Int64N(3*3600),
			Partition:    rng.Float64(),
			QOS:          rng.Float64(),
		}
	}
	return jobs
}

func BenchmarkRank(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, mode := range []Mode{ModeLAS, ModeGittins} {
			b.Run("jobs="+strconv.Itoa(n)+"/mode="+string(mode), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.Mode = mode
				cfg.PromoteKnob = 2
				r, err := NewRanker(cfg, SeedDistribution())
				if err != nil {
					b.Fatal(err)
				}
				jobs := benchJobs(n, cfg)
				out := r.Rank(benchNow, jobs, nil) // warm the scratch buffers
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					out = r.Rank(benchNow, jobs, out)
				}
			})
		}
	}
}

// BenchmarkRankOpportunistic is BenchmarkRank's Gittins case with the
// opportunistic class on and one job in four opportunistic (some of them
// waiting long enough to be upgraded): the cost of the second band of
// queues.
func BenchmarkRankOpportunistic(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		for _, on := range []bool{false, true} {
			b.Run("jobs="+strconv.Itoa(n)+"/class="+strconv.FormatBool(on), func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.PromoteKnob = 2
				cfg.Opportunistic = Opportunistic{Enabled: on, Rules: sharing.Config{PromoteAfter: 2 * 3600}}
				r, err := NewRanker(cfg, SeedDistribution())
				if err != nil {
					b.Fatal(err)
				}
				jobs := benchJobs(n, cfg)
				for i := range jobs {
					jobs[i].Opportunistic = i%4 == 0
				}
				out := r.Rank(benchNow, jobs, nil)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					out = r.Rank(benchNow, jobs, out)
				}
			})
		}
	}
}
