package core

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/placement"
)

// fakeRun is a RunInfo with fixed answers that counts how often it is read.
type fakeRun struct {
	typ, model string
	reads      int
}

func (f *fakeRun) GPUType() string  { f.reads++; return f.typ }
func (f *fakeRun) ModelKey() string { return f.model }

func openEffectiveCore(t *testing.T, db string, effective bool, log *bytes.Buffer) *Core {
	t.Helper()
	cfg := testConfig(db)
	cfg.Tiresias.EffectiveService = effective
	cfg.GPUTypes = map[string]float64{"a": 2, "b": 1}
	cfg.Placement.Models = map[string]placement.Model{
		"fast_on_a": {Speed: map[string]float64{"a": 3, "b": 1}},
		"slow_on_a": {Speed: map[string]float64{"a": 1, "b": 1}},
	}
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, store, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func onType(s Snapshot, run *fakeRun) Snapshot { s.Run = run; return s }

func TestEffectiveServiceWeighsEachJobByItsGPUTypesSpeed(t *testing.T) {
	cases := []struct {
		name      string
		effective bool
		run       *fakeRun
		want      float64 // service after 40 s on 2 GPUs
	}{
		{"off: plain GPU-seconds on the fast type", false, &fakeRun{typ: "a"}, 80},
		{"on: type a's default speed doubles it", true, &fakeRun{typ: "a"}, 160},
		{"on: type b's default speed leaves it", true, &fakeRun{typ: "b"}, 80},
		{"on: the model's table speed wins over the type default", true, &fakeRun{typ: "a", model: "fast_on_a"}, 240},
		// Issue 20 item 2: a job's own model key cannot slow its service
		// below its GPU type's speed (1 on a, not a's 2, by that model's row).
		{"on: a declared model slow on the type cannot lower the type's speed", true, &fakeRun{typ: "a", model: "slow_on_a"}, 160},
		{"on: untyped GPUs count plain GPU-seconds", true, &fakeRun{}, 80},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			c := openEffectiveCore(t, filepath.Join(t.TempDir(), "l.db"), tc.effective, &log)
			defer c.Close()
			pass(c, 1020, onType(running(1, 2, 1000, 1010), tc.run))
			d := pass(c, 1050, onType(running(1, 2, 1000, 1010), tc.run))
			if d[0].Service != tc.want {
				t.Fatalf("service %v, want %v", d[0].Service, tc.want)
			}
			lines := strings.Count(log.String(), "effective service: run weighted")
			if want := map[bool]int{false: 0, true: 1}[tc.effective]; lines != want || tc.run.reads != want {
				t.Fatalf("%d log lines and %d reads of the run for two passes, want %d:\n%s", lines, tc.run.reads, want, log.String())
			}
		})
	}
}

func TestEffectiveSpeedIsKeptPerRunAndAcrossRestarts(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	var log bytes.Buffer
	c := openEffectiveCore(t, db, true, &log)
	a := &fakeRun{typ: "a"}
	pass(c, 1050, onType(running(1, 1, 1000, 1000), a)) // 50 s on a: 100
	pass(c, 1060, pending(1, 1, 1060))                  // requeued
	d := pass(c, 1100, onType(running(1, 1, 1060, 1080), &fakeRun{typ: "b"}))
	if d[0].Service != 100+20 {
		t.Fatalf("service %v after a run on a and one on b, want 120", d[0].Service)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2 := openEffectiveCore(t, db, true, &log)
	defer c2.Close()
	again := &fakeRun{typ: "a"} // a lie the core must not need to read again
	d = pass(c2, 1110, onType(running(1, 1, 1060, 1080), again))
	if d[0].Service != 100+30 || again.reads != 0 {
		t.Fatalf("after restart: service %v (want 130 at b's speed), run read %d times (want 0: the ledger keeps the speed)", d[0].Service, again.reads)
	}
}

// A job on type a (speed 2) really ends at 1015 but slurmctld completes it
// at 1035; the node's report takes 20 s off at the rate the run was
// charged, so the history keeps the work done (30), not 2 × 15 GPU-seconds
// more (50) as a correction at the plain rate would leave.
func TestNodeReportedEndOfAWeightedRunCorrectsAtItsSpeed(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	var log bytes.Buffer
	c := openEffectiveCore(t, db, true, &log)
	a := &fakeRun{typ: "a"}
	pass(c, 1007, onType(running(1, 1, 1000, 1000), a))
	pass(c, 1035, onType(running(1, 1, 1000, 1000), a))
	fin := Snapshot{ID: 1, State: StateFinished, GPUs: 1, SubmitTime: 1000, StartTime: 1000, EndTime: 1035}
	pass(c, 1036, fin)
	c.ReportEnd(1, 1015, "n1")
	store := closedLedger(t, c, db)
	got, _, err := store.CompletedGPUTimes(10)
	if err != nil || len(got) != 1 || got[0] != 30 {
		t.Fatalf("history = %v, %v; want [30]: 15 s at speed 2", got, err)
	}
}
