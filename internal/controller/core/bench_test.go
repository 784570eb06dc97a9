package core

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// BenchmarkPass measures one whole pass as slurmctld runs it: folding every
// job's snapshot into the ledger records, ranking, and recording decisions.
// The ledger writer runs concurrently, as in slurmctld.
func BenchmarkPass(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				b.Fatal(err)
			}
			cfg := testConfig(db)
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
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
}
