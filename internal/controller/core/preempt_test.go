package core

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

func TestPreemptableNeedsGPUsOnBothSidesAndALowerQueue(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	// Job 1 ran 8 GPUs for 100 s: demoted. Job 3 ran without GPUs.
	pass(c, 1100, running(1, 8, 900, 1000), pending(2, 1, 1050), running(3, 0, 900, 1000), pending(4, 0, 1050))
	cpu := pending(5, 0, 1101)
	c.Enqueue(1101, &cpu)
	gpu := pending(6, 2, 1101)
	c.Enqueue(1101, &gpu)
	cases := []struct {
		name                 string
		preemptor, preemptee uint32
		want                 bool
	}{
		{"GPU job of queue 0 preempts the demoted GPU job", 2, 1, true},
		{"GPU job enqueued since the pass preempts the demoted GPU job", 6, 1, true},
		{"CPU-only job ranked by the pass does not preempt the demoted GPU job", 4, 1, false},
		{"CPU-only job enqueued since the pass does not preempt the demoted GPU job", 5, 1, false},
		{"GPU job does not preempt a CPU-only job", 2, 3, false},
		{"demoted job does not preempt a job of queue 0", 1, 2, false},
		{"unknown victim is not preempted", 2, 99, false},
		{"unknown preemptor preempts nobody", 98, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Preemptable(tc.preemptor, tc.preemptee); got != tc.want {
				t.Fatalf("Preemptable(%d, %d) = %v, want %v", tc.preemptor, tc.preemptee, got, tc.want)
			}
		})
	}
}

func TestPreemptionPossibleOnlyWhenAWaitingGPUJobOutranksARunningOne(t *testing.T) {
	cases := []struct {
		name    string
		snaps   []Snapshot
		enqueue *Snapshot
		want    bool
	}{
		{"no job: impossible", nil, nil, false},
		{"running GPU job in queue 0, waiting GPU job in queue 0: impossible",
			[]Snapshot{running(1, 4, 1090, 1095), pending(2, 1, 1090)}, nil, false},
		{"demoted running GPU job, waiting GPU job in queue 0: possible",
			[]Snapshot{running(1, 8, 900, 1000), pending(2, 1, 1050)}, nil, true},
		{"demoted running GPU job, only CPU-only jobs waiting: impossible",
			[]Snapshot{running(1, 8, 900, 1000), pending(2, 0, 1050)}, nil, false},
		{"demoted running CPU-only job, waiting GPU job: impossible",
			[]Snapshot{running(1, 0, 900, 1000), pending(2, 1, 1050)}, nil, false},
		{"demoted running GPU job, GPU job enqueued since the pass: possible",
			[]Snapshot{running(1, 8, 900, 1000)}, &Snapshot{ID: 3, State: StatePending, GPUs: 1, SubmitTime: 1101}, true},
		{"demoted running GPU job, CPU-only job enqueued since the pass: impossible",
			[]Snapshot{running(1, 8, 900, 1000)}, &Snapshot{ID: 3, State: StatePending, SubmitTime: 1101}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			if tc.snaps != nil {
				pass(c, 1100, tc.snaps...)
			}
			if tc.enqueue != nil {
				c.Enqueue(1101, tc.enqueue)
			}
			if got := c.PreemptionPossible(); got != tc.want {
				t.Fatalf("PreemptionPossible() = %v, want %v", got, tc.want)
			}
		})
	}
}

// The core asks the same cost rule as the simulator: a victim whose run is
// younger than min_run (600 s by default) keeps its GPUs; once it is old
// enough it may be preempted, and the pass that finds it requeued logs why
// and keeps the reason in its ledger record.
func TestPreemptable_KeepsYoungRunsAndRecordsWhyAJobWasPreempted(t *testing.T) {
	var logged bytes.Buffer
	db := filepath.Join(t.TempDir(), "l.db")
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(testConfig(db), store, slog.New(slog.NewTextHandler(&logged, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var now int64 = 1100
	c.clock = func() int64 { return now }
	// Job 1: 40 GPUs for 100 s = 4,000 GPU-s: queue 2 under the test thresholds.
	pass(c, 1100, running(1, 40, 900, 1000), pending(2, 1, 1050))
	cases := []struct {
		name string
		at   int64
		want bool
	}{
		{"victim that ran 100 s keeps its GPUs", 1100, false},
		{"victim that ran 599 s keeps its GPUs", 1599, false},
		{"victim that ran 600 s is preempted", 1600, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now = tc.at
			if got := c.Preemptable(2, 1); got != tc.want {
				t.Fatalf("Preemptable(2, 1) at %d = %v, want %v", tc.at, got, tc.want)
			}
		})
	}
	// Slurm preempts job 1 at 1600 (it asks its grace time: Preempting).
	c.Preempting(1, 1600)
	pass(c, 1630, pending(1, 40, 900), running(2, 1, 1050, 1620))
	c.mu.Lock()
	reason := c.records[1].PreemptReason
	c.mu.Unlock()
	want := "preempted by job 2 (queue 0) from queue 2 after a 600 s run"
	if reason != want {
		t.Fatalf("ledger reason %q, want %q", reason, want)
	}
	if !strings.Contains(logged.String(), "job preempted") || !strings.Contains(logged.String(), want) {
		t.Fatalf("slurmctld's log lacks the preemption and its reason:\n%s", logged.String())
	}
}

func TestVictimOrder(t *testing.T) {
	cases := []struct {
		name      string
		spread    bool
		preempted bool     // job 1's requeue was a preemption, not its owner's
		want      []uint32 // jobs 1-3 in the order Slurm is to take them
	}{
		// 2D-LAS: job 1 entered queue 2 last, so it ranks lowest there;
		// it is also the only one requeued.
		{"without spreading the lowest-ranked job goes first", false, true, []uint32{1, 3, 2}},
		{"spread victims take the preempted job last", true, true, []uint32{3, 2, 1}},
		// issue 20: its owner's own `scontrol requeue` must not move a job
		// to the back of the victim order.
		{"spread victims: a job its owner requeued is no preempted job", true, false, []uint32{1, 3, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(db)
			cfg.Tiresias.Mode = priority.ModeLAS
			cfg.Tiresias.Preemption.SpreadVictims = tc.spread
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Jobs 2 and 3 reach queue 2 (1,000 GPU-s) by 1100, job 1
			// (600 GPU-s by then) only at 1600, after a requeue: it
			// restarted at 1150, a new run.
			pass(c, 1100, running(1, 1, 0, 500), running(2, 1, 0, 10), running(3, 1, 0, 10))
			if tc.preempted {
				c.Preempting(1, 1140)
			}
			pass(c, 1600, running(1, 1, 0, 1150), running(2, 1, 0, 10), running(3, 1, 0, 10), pending(4, 1, 1590))
			var got []uint32
			for n := uint32(1); n <= 3; n++ {
				for id := uint32(1); id <= 3; id++ {
					if c.VictimOrder(id) == n {
						got = append(got, id)
					}
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("victim order %v, want %v", got, tc.want)
			}
			if o := c.VictimOrder(4); o != math.MaxUint32 {
				t.Fatalf("a pending job's victim order = %d, want the last (MaxUint32)", o)
			}
		})
	}
}
