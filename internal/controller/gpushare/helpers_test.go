package gpushare

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

const (
	owner   = 1001
	mallory = 1002
)

// testCore is sharing as the core drives it: restored from a ledger at
// start, judged at each pass on the pass's jobs as the core ranks them,
// flushed to the ledger (on Close and when a test reads it), its
// requeuer stopped on Close.
type testCore struct {
	*Sharing
	store      *ledger.SQLite
	pairScores map[uint32]float64
	stop       chan struct{}
}

func testConfig(db string) config.Config {
	c := config.Default()
	c.DBPath = db
	return c
}

// sharingRules is the sharing rules with maxSlowdown and no memory
// headroom (what a config.Sharing literal with only max_slowdown set gave
// before the rules were one sharing.Config).
func sharingRules(maxSlowdown float64) sharing.Config {
	r := sharing.DefaultConfig()
	r.MaxSlowdown, r.GuestMemoryHeadroomPct = maxSlowdown, 0
	return r
}

func openCore(t testing.TB, db string) *testCore {
	t.Helper()
	return openCoreWith(t, testConfig(db))
}

func openCoreWith(t testing.TB, cfg config.Config) *testCore {
	t.Helper()
	return openCoreLog(t, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func openCoreLog(t testing.TB, cfg config.Config, log *slog.Logger) *testCore {
	t.Helper()
	store, err := ledger.Open(cfg.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &testCore{Sharing: New(cfg, log), store: store, pairScores: map[uint32]float64{}, stop: make(chan struct{})}
	if err := c.Restore(store, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	return c
}

// openMetricsCore is openCore with metrics.listen set.
func openMetricsCore(t *testing.T) *testCore {
	t.Helper()
	cfg := testConfig(filepath.Join(t.TempDir(), "l.db"))
	cfg.Metrics.Listen = "127.0.0.1:0"
	c := openCoreWith(t, cfg)
	t.Cleanup(func() { c.Close() })
	return c
}

// Close stops the requeuer, flushes what changed and closes the ledger, as
// the core's Close does.
func (c *testCore) Close() error {
	select {
	case <-c.stop:
		return nil
	default:
	}
	close(c.stop)
	c.Flush(c.store)
	return c.store.Close()
}

// closedLedger closes c and opens the ledger it wrote at db, for the test
// to read (closed at the test's end).
func closedLedger(t *testing.T, c *testCore, db string) *ledger.SQLite {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// pass judges jobs as a pass of the core does, after its ranking: a job
// the ranker sees (neither finished nor held) is opportunistic when the
// class is on and its partition is the opportunistic one (no test here
// waits promote_after). It returns the jobs with sharing's answers.
func pass(c *testCore, now int64, jobs ...Job) []Job {
	out := slices.Clone(jobs)
	for i := range out {
		j := &out[i]
		j.Opportunistic = c.cfg.Tiresias.Opportunistic.Enabled && j.State != Finished && !j.Held &&
			c.cfg.Sharing.Opportunistic(j.Partition)
	}
	c.Judge(now, c.cfg, out, c.pairScores)
	return out
}

// SizeJob is the core's sizing at submit: a guaranteed share refused,
// else Synergy's, then maybe shards.
func (c *testCore) SizeJob(req synergy.Request, nodes []synergy.Node) synergy.Decision {
	if d, refused := RefuseGuaranteedShare(c.cfg.Sharing, req); refused {
		return d
	}
	d := synergy.Decide(c.cfg.Synergy, req, nodes, func(string, uint32) (sensitivity.Demand, bool) { return sensitivity.Demand{}, false })
	return c.ConvertToShards(c.cfg.Sharing, req, nodes, d)
}

func running(id, gpus uint32, submit, start int64) Job {
	return Job{ID: id, State: Running, OneGPU: gpus == 1, OneNode: true, WaitingSince: submit}
}

func pending(id, gpus uint32, submit int64) Job {
	return Job{ID: id, State: Pending, OneNode: true, WaitingSince: submit}
}

// sameRequest compares what a requeue request asks (not its callback).
func sameRequest(a, b requeueRequest) bool {
	return a.job == b.job && a.node == b.node && a.exclude == b.exclude
}
