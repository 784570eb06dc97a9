package core

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/internal/util/metricsrv"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/quota"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// openMetricsCore is openCore with metrics.listen set (New records; only
// Open listens).
func openMetricsCore(t *testing.T) *Core {
	t.Helper()
	return openMetricsCoreWith(t, func(*config.Config) {})
}

// openMetricsCoreWith is openMetricsCore with the config changed by set.
func openMetricsCoreWith(t *testing.T, set func(*config.Config)) *Core {
	t.Helper()
	db := filepath.Join(t.TempDir(), "l.db")
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(db)
	cfg.Metrics.Listen = "127.0.0.1:0"
	set(&cfg)
	c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestNoMetricsWithoutListen(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	if c.met != nil {
		t.Fatal("metrics recorded although metrics.listen is empty")
	}
	pass(c, 1010, running(1, 1, 1000, 1000)) // nil metrics must not panic
	c.Preemptable(1, 2)
}

func TestPassRecordsQueuesDemotionsAndPromotions(t *testing.T) {
	c := openMetricsCore(t)
	m := c.met
	pass(c, 1010, running(1, 1, 1000, 1000), pending(2, 1, 1005))
	if got := testutil.ToFloat64(m.queueJobs.WithLabelValues("0")); got != 2 {
		t.Fatalf("queue 0 jobs after the first pass = %v, want 2", got)
	}
	pass(c, 1200, running(1, 1, 1000, 1000), pending(2, 1, 1005)) // job 1: 200 s → queue 1
	if q0, q1 := testutil.ToFloat64(m.queueJobs.WithLabelValues("0")), testutil.ToFloat64(m.queueJobs.WithLabelValues("1")); q0 != 1 || q1 != 1 {
		t.Fatalf("queue jobs = %v,%v; want 1,1", q0, q1)
	}
	if got := testutil.ToFloat64(m.demotions); got != 1 {
		t.Fatalf("demotions = %v, want 1", got)
	}
	pass(c, 1201, pending(1, 1, 1201), pending(2, 1, 1005)) // requeued; waiting since 1200
	pass(c, 1600, pending(1, 1, 1201), pending(2, 1, 1005)) // waited 2 × 200: promoted
	if got := testutil.ToFloat64(m.promotions); got != 1 {
		t.Fatalf("promotions = %v, want 1", got)
	}
	if q1 := testutil.ToFloat64(m.queueJobs.WithLabelValues("1")); q1 != 0 {
		t.Fatalf("queue 1 jobs after the promotion = %v, want 0 (an emptied queue reads 0)", q1)
	}
	if got := testutil.CollectAndCount(m.passSeconds); got != 1 {
		t.Fatalf("%d pass histograms, want 1", got)
	}
	if n := histogramCount(t, c); n != 4 {
		t.Fatalf("pass count = %d, want 4", n)
	}
}

func histogramCount(t *testing.T, c *Core) uint64 {
	t.Helper()
	mfs, err := c.met.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == MetricPassDuration {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("%s not gathered", MetricPassDuration)
	return 0
}

// lachesis_preemptions_allowed_total counts the yeses Slurm got;
// lachesis_preemptions_total counts requeues, once each, when a pass sees
// the victim Slurm said it preempts pending again: Slurm asks about every candidate of a victim
// search and requeues fewer (issue 26 item 3: 30 counted against 5 real
// requeues).
func TestPreemptionsCountRequeuesAndAllowsSeparately(t *testing.T) {
	c := openMetricsCore(t)
	pass(c, 2000, running(1, 4, 1000, 1000), running(3, 4, 1000, 1000), pending(2, 1, 1999))
	tests := []struct {
		name                string
		preemptor, preemtee uint32
		allowed             float64
	}{
		{"queue 0 over queue 2 is allowed", 2, 1, 1},
		{"queue 2 over queue 0 is not", 1, 2, 1},
		{"unknown victim is not", 2, 99, 1},
		{"asked again: allowed again", 2, 1, 2},
		{"another candidate of the search", 2, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.Preemptable(tt.preemptor, tt.preemtee)
			if got := testutil.ToFloat64(c.met.allowed); got != tt.allowed {
				t.Fatalf("allowed = %v, want %v", got, tt.allowed)
			}
		})
	}
	if got := testutil.ToFloat64(c.met.preemptions); got != 0 {
		t.Fatalf("preemptions = %v before any requeue, want 0", got)
	}
	// Slurm requeued job 1 only (job 3 was allowed but kept running), asking
	// its grace time first (preempt/tiresias: Preempting); job 2 started.
	c.Preempting(1, 2001)
	pass(c, 2001, pending(1, 4, 2001), running(3, 4, 1000, 1000), running(2, 1, 1999, 2001))
	pass(c, 2002, pending(1, 4, 2001), running(3, 4, 1000, 1000), running(2, 1, 1999, 2001))
	if got := testutil.ToFloat64(c.met.preemptions); got != 1 {
		t.Fatalf("preemptions = %v after one requeue, want 1", got)
	}
	// An admin's scontrol requeue of job 3 is no preemption.
	pass(c, 2003, pending(1, 4, 2001), pending(3, 4, 2003), running(2, 1, 1999, 2001))
	if got := testutil.ToFloat64(c.met.preemptions); got != 1 {
		t.Fatalf("preemptions = %v after an admin's requeue, want still 1", got)
	}
}

func TestSizingDecisionsByOutcome(t *testing.T) {
	c := openMetricsCore(t)
	c.SizeJob(synergy.Request{Name: "no-gpus"}, nil) // no GPUs: left alone
	c.met.sized(synergy.Set)
	c.met.sized(synergy.Reject)
	c.met.sized(synergy.Reject)
	c.met.sized(synergy.ToShards)
	c.met.sized(synergy.Action(7)) // unknown: ignored, not a panic
	want := `
# HELP lachesis_sizing_decisions_total Synergy sizing decisions at submit, by outcome.
# TYPE lachesis_sizing_decisions_total counter
lachesis_sizing_decisions_total{outcome="leave"} 1
lachesis_sizing_decisions_total{outcome="reject"} 2
lachesis_sizing_decisions_total{outcome="set"} 1
lachesis_sizing_decisions_total{outcome="shards"} 1
`
	if err := testutil.GatherAndCompare(c.met.reg, strings.NewReader(want), MetricSizing); err != nil {
		t.Fatal(err)
	}
}

func TestPassRecordingDoesNotAllocate(t *testing.T) {
	c := openMetricsCore(t)
	snaps := []Snapshot{running(1, 1, 1000, 1000), pending(2, 1, 1005), running(3, 2, 900, 950)}
	out := make([]Decision, len(snaps))
	now := int64(2000)
	c.Pass(now, snaps, out)
	start := time.Now()
	allocs := leastAllocs(20, func() {
		c.met.queueChange(0, 1, false)
		c.met.queueChange(1, 0, true)
		c.met.opportunistic(true, false, true)
		c.met.passDone(start)
	})
	if allocs != 0 {
		t.Fatalf("recording a pass allocates %v times, want 0", allocs)
	}
}

// TestOpenServesMetricsAndTheAgentListener opens a core as slurmctld does,
// with metrics.listen and agent.listen set, and scrapes it.
// A slurmctld that `scontrol reconfigure` started to replace a running one
// (Slurm 24.05 and later) opens while the old one still holds the metrics
// address: it starts anyway, says the config was reloaded, and serves the
// address once the old one lets it go. A plain start on a taken address is
// still an error.
func TestOpenForAReconfigureWaitsForTheMetricsAddress(t *testing.T) {
	old, err := metricsrv.Start("127.0.0.1:0", prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := old.Addr().String()
	dir := t.TempDir()
	conf := filepath.Join(dir, "lachesis.yaml")
	writeFile(t, conf, "db_path: "+filepath.Join(dir, "l.db")+"\nmetrics:\n  listen: "+addr+"\n")
	if c, err := Open(Env{ConfigPath: conf}, slog.New(slog.DiscardHandler)); err == nil {
		c.Close()
		t.Fatal("a plain start on a taken metrics address succeeded")
	}
	logged := &testenv.SyncBuffer{}
	c, err := Open(Env{ConfigPath: conf, Reconfigure: true}, slog.New(slog.NewTextHandler(logged, nil)))
	if err != nil {
		t.Fatalf("open for a reconfigure: %v", err)
	}
	defer c.Close()
	if !strings.Contains(logged.String(), `msg="queue thresholds in force" when=reload`) || strings.Contains(logged.String(), "when=start") {
		t.Errorf("log does not call the config a reload:\n%s", logged.String())
	}
	old.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), MetricPassDuration) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new core never served %s after the old one let it go: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestOpenServesMetricsAndTheAgentListener(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "lachesis.yaml")
	writeFile(t, conf, "db_path: "+filepath.Join(dir, "l.db")+"\nmetrics:\n  listen: 127.0.0.1:0\nagent:\n  listen: 127.0.0.1:0\n")
	c, err := Open(Env{ConfigPath: conf}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pass(c, 1010, running(1, 1, 1000, 1000))
	resp, err := http.Get("http://" + c.metricsSrv.(*metricsrv.Server).Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		MetricPassDuration + "_count 1",
		MetricQueueJobs + `{queue="0"} 1`,
		MetricAgentConns + " 0",
		MetricAgentReports + `{kind="telemetry"} 0`,
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		os.Stderr.Write(body)
	}
}

func TestOpportunisticJobsAndUpgradesAreCounted(t *testing.T) {
	c := openMetricsCore(t)
	c.cfg.Sharing.OpportunisticPartition = "opp"
	c.cfg.Tiresias.Opportunistic = priority.Opportunistic{Enabled: true, Rules: sharing.Config{PromoteAfter: 300}}
	if err := c.rebuildRanker(); err != nil {
		t.Fatal(err)
	}
	part := func(s Snapshot, p string) Snapshot { s.Partition = p; return s }
	// Job 4, guaranteed, is held: it holds no upgrade back (a waiting one
	// would: priority's upgrades).
	held := part(pending(4, 1, 900), "gpu")
	held.Held = true
	pass(c, 1000, part(pending(1, 1, 900), "opp"), part(pending(2, 1, 600), "opp"), part(running(3, 1, 900, 950), "opp"), held)
	want := `
# HELP lachesis_opportunistic_jobs Jobs of the opportunistic class (not upgraded, not held) after the last pass, by state (pending, running).
# TYPE lachesis_opportunistic_jobs gauge
lachesis_opportunistic_jobs{state="pending"} 1
lachesis_opportunistic_jobs{state="running"} 1
# HELP lachesis_opportunistic_upgrades_total Opportunistic jobs upgraded to guaranteed after waiting sharing.promote_after.
# TYPE lachesis_opportunistic_upgrades_total counter
lachesis_opportunistic_upgrades_total 1
`
	if err := testutil.GatherAndCompare(c.met.reg, strings.NewReader(want), MetricOppJobs, MetricOppUpgrades); err != nil {
		t.Fatal(err)
	}
}

// Issue 35: each account's deserved, allocated and borrowed GPUs after a
// pass, and the borrowers requeued for it, as KAI shows per queue.
func TestQuotaFiguresPerAccount(t *testing.T) {
	c := openMetricsCoreWith(t, func(cfg *config.Config) {
		cfg.Quota = config.Quota{Accounts: map[string]quota.Spec{"own": {Cells: 2, CellGPUs: 2}}, MaxReclaimPerPass: 4}
	})
	pass(c, 2000,
		requeueable(inAccount(running(1, 2, 100, 1000), "own")),
		requeueable(inAccount(running(2, 4, 100, 1500), "own")), // beyond the quota
		requeueable(inAccount(running(3, 1, 100, 1900), "other")),
		waitsForGPUs(inAccount(pending(4, 1, 1990), "own")),
	)
	want := `
# HELP lachesis_quota_gpus GPUs of each account after the last pass, by kind: deserved (its quota), allocated (its running jobs'), borrowed (its running jobs' beyond its quota). Only with a quota section.
# TYPE lachesis_quota_gpus gauge
lachesis_quota_gpus{account="other",kind="allocated"} 1
lachesis_quota_gpus{account="other",kind="borrowed"} 1
lachesis_quota_gpus{account="other",kind="deserved"} 0
lachesis_quota_gpus{account="own",kind="allocated"} 6
lachesis_quota_gpus{account="own",kind="borrowed"} 4
lachesis_quota_gpus{account="own",kind="deserved"} 4
# HELP lachesis_quota_reclaimed_total Borrowed jobs of other accounts requeued so that the account's within-quota jobs could run.
# TYPE lachesis_quota_reclaimed_total counter
lachesis_quota_reclaimed_total{account="own"} 1
`
	if err := testutil.GatherAndCompare(c.met.reg, strings.NewReader(want), MetricQuotaGPUs, MetricQuotaReclaims); err != nil {
		t.Fatal(err)
	}
}
