package core

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// oppConfig is testConfig with the opportunistic class on partition "opp",
// upgrading after 300 s of waiting.
func oppConfig(db string) config.Config {
	c := testConfig(db)
	c.Sharing = config.Sharing{OpportunisticPartition: "opp", Rules: sharing.DefaultConfig()}
	c.Sharing.Rules.MaxSlowdown, c.Sharing.Rules.GuestMemoryHeadroomPct, c.Sharing.Rules.PromoteAfter = 0, 0, 300
	c.Tiresias.Opportunistic = priority.Opportunistic{Enabled: true, Rules: c.Sharing.Rules}
	return c
}

func inClassPartition(s Snapshot, partition string) Snapshot {
	s.Partition = partition
	s.RequeueAllowed = true
	return s
}

func openOppCore(t *testing.T, db string, log *bytes.Buffer) *Core {
	t.Helper()
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(oppConfig(db), store, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOpportunisticJobsYieldAndNeverPreempt(t *testing.T) {
	var log bytes.Buffer
	c := openOppCore(t, filepath.Join(t.TempDir(), "l.db"), &log)
	defer c.Close()
	// Job 5 runs 1500 GPU-s (queue 2), then is requeued: a guaranteed job
	// waiting in the last queue.
	pass(c, 1500, inClassPartition(running(5, 1, 1, 1), "gpu"))
	now := int64(2000)
	c.clock = func() int64 { return now }
	d := pass(c, now,
		inClassPartition(running(1, 1, 1900, 1990), "opp"), // opportunistic, 10 s into its run, queue 0
		inClassPartition(running(2, 1, 1, 1), "gpu"),       // guaranteed, 1999 GPU-s: queue 2
		inClassPartition(pending(3, 1, 1995), "gpu"),       // guaranteed, queue 0
		inClassPartition(pending(4, 1, 1995), "opp"),       // opportunistic, waiting, queue 0
		inClassPartition(pending(5, 1, 1), "gpu"),          // guaranteed, queue 2, waiting
		inClassPartition(pending(6, 1, 1995), "gpu,opp"),   // lists both: opportunistic
		inClassPartition(running(7, 1, 1, 1), "opp"),       // opportunistic, 1999 GPU-s: queue 2
	)
	cases := []struct {
		name                 string
		preemptor, preemptee uint32
		want                 bool
	}{
		{"guaranteed job of queue 0 does not requeue an opportunistic job of its queue", 3, 1, false},
		{"guaranteed job of queue 0 requeues an opportunistic job of the last queue, queue_gap aside", 3, 7, true},
		{"guaranteed job of the last queue does not requeue an opportunistic job of queue 0, ranked above it", 5, 1, false},
		{"opportunistic job does not preempt a guaranteed job of a lower queue", 4, 2, false},
		{"job listing the guaranteed partition beside the opportunistic one preempts nothing", 6, 2, false},
		{"guaranteed jobs keep Tiresias's rule between themselves", 3, 2, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Preemptable(tc.preemptor, tc.preemptee); got != tc.want {
				t.Fatalf("Preemptable(%d, %d) = %v, want %v", tc.preemptor, tc.preemptee, got, tc.want)
			}
		})
	}
	t.Run("an opportunistic job is the first victim, before a guaranteed job of a lower queue", func(t *testing.T) {
		if a, b := c.VictimOrder(1), c.VictimOrder(2); !(a < b) {
			t.Fatalf("victim order: opportunistic %d, guaranteed %d", a, b)
		}
	})
	t.Run("a waiting opportunistic job of queue 0 ranks above a guaranteed job of the last queue", func(t *testing.T) {
		if !d[3].Opportunistic || d[4].Opportunistic || !(d[3].Priority > d[4].Priority) || d[4].Queue != 2 {
			t.Fatalf("opportunistic %+v, guaranteed %+v", d[3], d[4])
		}
		if !d[5].Opportunistic {
			t.Fatalf("job listing gpu,opp: %+v", d[5])
		}
	})
}

func TestPreemptionPossibleWhenAnOpportunisticJobRuns(t *testing.T) {
	cases := []struct {
		name  string
		snaps []Snapshot
		want  bool
	}{
		{"opportunistic job runs, guaranteed job of the same queue waits: possible",
			[]Snapshot{inClassPartition(running(1, 1, 1090, 1095), "opp"), inClassPartition(pending(2, 1, 1090), "gpu")}, true},
		{"opportunistic job runs, only opportunistic jobs wait: impossible",
			[]Snapshot{inClassPartition(running(1, 1, 1090, 1095), "opp"), inClassPartition(pending(2, 1, 1090), "opp")}, false},
		{"demoted guaranteed job runs, only opportunistic jobs wait: impossible",
			[]Snapshot{inClassPartition(running(1, 8, 900, 1000), "gpu"), inClassPartition(pending(2, 1, 1050), "opp")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			c := openOppCore(t, filepath.Join(t.TempDir(), "l.db"), &log)
			defer c.Close()
			pass(c, 1100, tc.snaps...)
			if got := c.PreemptionPossible(); got != tc.want {
				t.Fatalf("PreemptionPossible = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a guaranteed job enqueued since the pass may preempt a running opportunistic job of a worse queue", func(t *testing.T) {
		var log bytes.Buffer
		c := openOppCore(t, filepath.Join(t.TempDir(), "l.db"), &log)
		defer c.Close()
		pass(c, 1100, inClassPartition(running(1, 1, 900, 900), "opp")) // 200 GPU-s: queue 1
		if c.PreemptionPossible() {
			t.Fatal("possible with nothing waiting")
		}
		s := inClassPartition(pending(2, 1, 1101), "gpu")
		c.Enqueue(1101, &s)
		if !c.PreemptionPossible() || !c.Preemptable(2, 1) {
			t.Fatal("the new guaranteed job cannot preempt the opportunistic one")
		}
	})
}

func TestOpportunisticJobIsUpgradedAfterPromoteAfterOnceAndForGood(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	var log bytes.Buffer
	c := openOppCore(t, db, &log)
	job := inClassPartition(pending(7, 1, 900), "opp") // waits since 900
	if d := pass(c, 1199, job); !d[0].Opportunistic {
		t.Fatalf("upgraded after 299 s: %+v", d[0])
	}
	d := pass(c, 1200, job)
	if d[0].Opportunistic || !strings.Contains(d[0].Marker, " up=1200") {
		t.Fatalf("not upgraded after 300 s, or no marker: %+v", d[0])
	}
	job.Marker = d[0].Marker
	pass(c, 1230, job)
	// It runs, and is requeued: it waits again, and is still guaranteed.
	run := inClassPartition(running(7, 1, 900, 1240), "opp")
	run.Marker = job.Marker
	pass(c, 1300, run)
	if d := pass(c, 1400, job); d[0].Opportunistic {
		t.Fatalf("a requeued upgraded job is opportunistic again: %+v", d[0])
	}
	if n := strings.Count(log.String(), "opportunistic job upgraded to guaranteed"); n != 1 {
		t.Fatalf("the upgrade is logged %d times, want once:\n%s", n, log.String())
	}
	c.Close()

	t.Run("a restart keeps the upgrade from the ledger", func(t *testing.T) {
		c := openOppCore(t, db, &bytes.Buffer{})
		defer c.Close()
		plain := job
		plain.Marker = ""
		if d := pass(c, 1500, plain); d[0].Opportunistic {
			t.Fatalf("opportunistic again after a restart: %+v", d[0])
		}
	})
	t.Run("a restart that lost the ledger keeps the upgrade from the marker", func(t *testing.T) {
		c := openOppCore(t, filepath.Join(t.TempDir(), "fresh.db"), &bytes.Buffer{})
		defer c.Close()
		if d := pass(c, 1500, job); d[0].Opportunistic {
			t.Fatalf("opportunistic again with the upgrade only in the marker: %+v", d[0])
		}
	})
}

func TestMarkerWithoutUpgradeKeepsItsOldForm(t *testing.T) {
	m := marker{closed: 1, queue: 1, runs: 1, firstSubmit: 5}
	if s := m.String(); strings.Contains(s, "up=") {
		t.Fatalf("marker of a job never upgraded: %q", s)
	}
	m.upgraded = 77
	got, err := parseMarker(m.String())
	if err != nil || got != m {
		t.Fatalf("parseMarker(%q) = %+v, %v", m.String(), got, err)
	}
	if _, err := parseMarker(strings.Replace(m.String(), "up=77", "up=-1", 1)); err == nil {
		t.Fatal("a negative upgrade time was accepted")
	}
}

func TestJobsOnShardsCountAsGPUJobs(t *testing.T) {
	c := openOppCore(t, filepath.Join(t.TempDir(), "l.db"), &bytes.Buffer{})
	defer c.Close()
	now := int64(1100)
	c.clock = func() int64 { return now }
	onShards := func(s Snapshot) Snapshot { s.GPUs, s.GPUShare = 0, true; return s }
	d := pass(c, now,
		onShards(inClassPartition(running(1, 0, 1000, 1000), "opp")), // an opportunistic job on a share, in queue 1
		onShards(inClassPartition(pending(2, 0, 1095), "gpu")),       // a guaranteed job asking for a share
		inClassPartition(pending(3, 1, 1095), "gpu"),                 // a guaranteed whole-GPU job
		inClassPartition(running(4, 0, 1000, 1090), "opp"),           // an opportunistic job without GPUs
	)
	if d[0].Service != 100 {
		t.Fatalf("the job on a share was charged %v GPU-s for 100 s; want 100 (one GPU)", d[0].Service)
	}
	for _, tc := range []struct {
		name                 string
		preemptor, preemptee uint32
		want                 bool
	}{
		{"a guaranteed job asking for a share requeues an opportunistic job on a share", 2, 1, true},
		{"a guaranteed whole-GPU job requeues an opportunistic job on a share", 3, 1, true},
		{"a job without GPUs or shards is still no victim", 3, 4, false},
	} {
		if got := c.Preemptable(tc.preemptor, tc.preemptee); got != tc.want {
			t.Errorf("%s: Preemptable(%d, %d) = %v", tc.name, tc.preemptor, tc.preemptee, got)
		}
	}
	if !c.PreemptionPossible() {
		t.Fatal("preemption impossible while guaranteed jobs wait and an opportunistic job on a share runs")
	}
}
