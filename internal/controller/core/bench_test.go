package core

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// BenchmarkPass measures one whole pass as slurmctld runs it: folding every
// job's snapshot into the ledger records, ranking, and recording decisions.
// The ledger writer runs concurrently, as in slurmctld. metrics=on records
// Prometheus metrics as with metrics.listen set.
func BenchmarkPass(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, withMetrics := range []bool{false, true} {
			benchmarkPass(b, n, withMetrics, false)
		}
	}
	benchmarkPass(b, 10000, false, true)
}

// benchmarkPass times a pass over n jobs. With sized, every pending job is
// one Lachesis sized that waits for resources, with a profile asking for
// more than its request: each is a candidate for start-time sizing.
func benchmarkPass(b *testing.B, n int, withMetrics, sized bool) {
	name := fmt.Sprintf("jobs=%d/metrics=off", n)
	if withMetrics {
		name = fmt.Sprintf("jobs=%d/metrics=on", n)
	}
	if sized {
		name += "/sized"
	}
	b.Run(name, func(b *testing.B) {
		db := filepath.Join(b.TempDir(), "l.db")
		store, err := ledger.Open(db)
		if err != nil {
			b.Fatal(err)
		}
		cfg := testConfig(db)
		if withMetrics {
			cfg.Metrics.Listen = "127.0.0.1:0" // New records; only Open listens
		}
		c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		c.bestCase = func(string, uint32) (sensitivity.Demand, bool) {
			return sensitivity.Demand{CPUsPerGPU: 9, MemGBPerGPU: 62.5}, true
		}
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		snaps := make([]Snapshot, n)
		for i := range snaps {
			s := &snaps[i]
			s.ID = uint32(i + 1)
			s.GPUs = uint32(1 << rng.IntN(4))
			s.SubmitTime = int64(rng.IntN(100000))
			if rng.IntN(4) == 0 { // a quarter running
				s.State = StateRunning
				s.StartTime = s.SubmitTime + int64(rng.IntN(1000))
			} else if sized {
				s.WaitsForResources = true
				s.AdminComment = "lachesis: model=res18 profile best case [lachesis:sized cpus=4 mem=64000 share_cpus=3 share_mem=64000]"
				s.SizingModel = "res18"
			}
		}
		out := make([]Decision, n)
		now := int64(200000)
		c.Pass(now, snaps, out) // creates the records
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			now += 30
			c.Pass(now, snaps, out)
		}
	})
}

// BenchmarkPassMetrics measures what metrics add to a pass of 10000 jobs
// alone: one queueChange per ranked job and one passDone, which the pass
// noise of BenchmarkPass hides.
func BenchmarkPassMetrics(b *testing.B) {
	m := newMetrics()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		for j := 0; j < 10000; j++ {
			m.queueChange(j%3, (j+1)%3, j%97 == 0)
		}
		m.passDone(start)
	}
}

// BenchmarkPassFinishedListed is a pass over 3,000 live jobs, alone and
// with 3,000 more that finished earlier and that slurmctld still lists for
// MinJobAge (issue 26 item 12's scale test): the cost in the core of
// handing those to every pass, which priority_tiresias.c no longer does
// once they are recorded (besides copying them under the job lock).
func BenchmarkPassFinishedListed(b *testing.B) {
	for _, finished := range []int{0, 3000} {
		b.Run(fmt.Sprintf("live=3000/finished=%d", finished), func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				b.Fatal(err)
			}
			c, err := New(testConfig(db), store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			snaps := make([]Snapshot, 3000+finished)
			for i := range snaps {
				s := &snaps[i]
				s.ID, s.GPUs, s.SubmitTime = uint32(i+1), 1, int64(i)
				if i >= 3000 {
					s.State, s.StartTime, s.EndTime = StateFinished, int64(i)+10, int64(i)+20
				}
			}
			out := make([]Decision, len(snaps))
			now := int64(200000)
			c.Pass(now, snaps, out) // records the finished ones
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += 30
				c.Pass(now, snaps, out)
			}
		})
	}
}

// BenchmarkPassOpportunistic is a pass over 10,000 jobs with the
// opportunistic class off and on: with it on, a quarter of the jobs are in
// the opportunistic partition (some of them listing a guaranteed one too)
// and every job's partition list is read each pass.
func BenchmarkPassOpportunistic(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("jobs=10000/class=%v", on), func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				b.Fatal(err)
			}
			cfg := oppConfig(db)
			// No upgrade during the run: the steady state, not the
			// one-time cost of upgrading thousands of jobs at once.
			cfg.Tiresias.Opportunistic.Rules.PromoteAfter = 1e6
			if !on {
				cfg = testConfig(db)
			}
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			rng := rand.New(rand.NewPCG(1, 10000))
			partitions := []string{"gpu", "gpu", "opp", "gpu,opp"}
			snaps := make([]Snapshot, 10000)
			for i := range snaps {
				s := &snaps[i]
				s.ID = uint32(i + 1)
				s.GPUs = uint32(1 << rng.IntN(4))
				s.SubmitTime = int64(rng.IntN(100000))
				s.Partition = partitions[i%len(partitions)]
				if rng.IntN(4) == 0 {
					s.State = StateRunning
					s.StartTime = s.SubmitTime + int64(rng.IntN(1000))
				}
			}
			out := make([]Decision, len(snaps))
			now := int64(200000)
			c.Pass(now, snaps, out)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += 30
				c.Pass(now, snaps, out)
			}
		})
	}
}

// BenchmarkFallbackHeld is the start-time sizing after a pass (Fallback)
// while jobs are held back for their request: every pass decides again,
// for each, that a node has its GPUs free and none its request
// (synergy.FitNow over the nodes) and keeps its clock. The plugin calls it
// only when the pass found candidates, after releasing the job lock.
func BenchmarkFallbackHeld(b *testing.B) {
	for _, held := range []int{10, 100} {
		b.Run(fmt.Sprintf("held=%d/nodes=512", held), func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				b.Fatal(err)
			}
			cfg := testConfig(db)
			cfg.Synergy.FallbackAfter = 7 * 24 * time.Hour // held throughout
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			snaps := make([]Snapshot, held)
			for i := range snaps {
				s := &snaps[i]
				s.ID, s.GPUs, s.SubmitTime, s.WaitsForResources = uint32(i+1), 1, int64(i), true
				s.AdminComment = "lachesis: model=res18 profile best case [lachesis:sized cpus=9 mem=64000 share_cpus=3 share_mem=64000]"
			}
			// Every node has a GPU free and 6 CPUs beside it: the share
			// fits, the best case nowhere.
			nodes := make([]NodeState, 512)
			for i := range nodes {
				nodes[i] = NodeState{CPUs: 24, AllocCPUs: 18, GPUs: 8, AllocGPUs: 7, MemMB: 512000, AllocMemMB: 100000, Usable: true}
			}
			out := make([]Decision, held)
			now := int64(200000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now++ // a pass a second: the week's wait outlasts any b.N
				b.StopTimer()
				c.Pass(now, snaps, out)
				b.StartTimer()
				if sh := c.Fallback(now, nodes, 16); len(sh) != 0 {
					b.Fatalf("%d shrinks within fallback_after", len(sh))
				}
			}
		})
	}
}
