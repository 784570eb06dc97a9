package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

func TestParseVisibleDevices(t *testing.T) {
	got, err := ParseVisibleDevices("2, 0,2")
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := ParseVisibleDevices("GPU-1234"); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("a UUID list: %v, want ErrBadConfig", err)
	}
	if _, err := (Config{Knee: 1, FakeGPU: FakeGPU{Dir: t.TempDir()}}).withDefaults(); !errors.Is(err, ErrNoFakeGPU) {
		t.Fatalf("a fake GPU directory without GPUs: %v", err)
	}
}

// The job counts as neighbours only other live processes with fresh
// records on one of its GPUs, and runs at the shared speed while it has
// any.
func TestNeighboursOnTheSameFakeGPUSlowTheJob(t *testing.T) {
	dir := t.TempDir()
	g := FakeGPU{Dir: dir, GPUs: []int{1}, SharedSpeed: 0.7}
	self := os.Getpid()
	fakegpu.Write(dir, fakegpu.Record{PID: self, GPUs: []int{1}})
	fakegpu.Write(dir, fakegpu.Record{PID: 1 << 30, GPUs: []int{1}}) // no such process
	fakegpu.Write(dir, fakegpu.Record{PID: 1, GPUs: []int{0}})       // another GPU
	if n := neighbours(g, self, time.Now()); len(n) != 0 || sharedSpeed(g, n) != 1 {
		t.Fatalf("%d neighbours, want none", len(n))
	}
	fakegpu.Write(dir, fakegpu.Record{PID: 1, GPUs: []int{0, 1}})
	if n := neighbours(g, self, time.Now()); len(n) != 1 || sharedSpeed(g, n) != 0.7 {
		t.Fatalf("%d neighbours at speed %v, want 1 at 0.7", len(n), sharedSpeed(g, n))
	}
	if n := neighbours(g, self, time.Now().Add(2*fakegpu.Stale)); len(n) != 0 {
		t.Fatalf("a stale record counted as a neighbour")
	}
}

// At speed s every step lasts StepCost/s: the busy time the job reports
// as utilisation is exactly that.
func TestGPUStepsLastLongerAtAnyLowerSpeed(t *testing.T) {
	cfg, err := Config{Knee: 1, Batch: 1, Spin: time.Millisecond, Steps: 5}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan time.Time, 5)
	for range 5 {
		ready <- time.Now()
	}
	var steps, busy atomic.Int64
	var speed atomic.Uint64
	speed.Store(f64bits(0.5))
	gpu(context.Background(), cfg, ready, &steps, &busy, &speed)
	if want := 5 * 2 * cfg.StepCost(); steps.Load() != 5 || time.Duration(busy.Load()) != want {
		t.Fatalf("%d steps busy %v, want 5 steps busy %v", steps.Load(), time.Duration(busy.Load()), want)
	}
}

// A run on a fake GPU keeps its record while it runs and removes it at
// the end.
func TestRunKeepsItsFakeGPURecord(t *testing.T) {
	dir := t.TempDir()
	memFile := filepath.Join(t.TempDir(), "mem")
	var out, log bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Knee: 1, Spin: 100 * time.Microsecond, DataPath: filepath.Join(t.TempDir(), "d"), DataBytes: 1 << 20,
			Out: &out, Log: &log, FakeGPU: FakeGPU{Dir: dir, GPUs: []int{3}, MemMB: 2048, MemFile: memFile}})
	}()
	path := filepath.Join(dir, fakegpu.FileName(os.Getpid()))
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := fakegpu.Read(path)
		if err == nil && r.PID == os.Getpid() && len(r.GPUs) == 1 && r.GPUs[0] == 3 && r.MemMB == 2048 && r.UtilPct > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record with utilisation: %+v, %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The memory file, once written, replaces -fake-gpu-mem-mb.
	if err := os.WriteFile(memFile, []byte("20000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := fakegpu.Read(path)
		if err == nil && r.MemMB == 20000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record does not follow the memory file: %+v, %v", r, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the record outlived the run: %v", err)
	}
}

// Without -shared-speed the speed beside a neighbour is the pair table's
// fraction for the two models, the slowest neighbour's; a pair the table
// lacks, or a neighbour without a model, does not slow the job, and a
// pair that did not run together (0) leaves it minSharedSpeed.
func TestSharedSpeedComesFromThePairTable(t *testing.T) {
	pairs := sharing.NewTable(sharing.Limits{})
	for _, p := range []struct {
		a, b   string
		fa, fb float64
	}{{"resnet", "lstm", 0.6, 0.8}, {"resnet", "a3c", 0.97, 0.9}, {"resnet", "gan", 0, 0}} {
		if err := pairs.Seed(p.a, p.b, p.fa, p.fb); err != nil {
			t.Fatal(err)
		}
	}
	g := FakeGPU{Model: "resnet", Pairs: pairs}
	for _, c := range []struct {
		neighbours []string
		want       float64
	}{
		{nil, 1}, {[]string{"lstm"}, 0.6}, {[]string{"a3c"}, 0.97}, {[]string{"a3c", "lstm"}, 0.6},
		{[]string{"unknown"}, 1}, {[]string{""}, 1}, {[]string{"gan"}, minSharedSpeed},
	} {
		if got := sharedSpeed(g, c.neighbours); got != c.want {
			t.Errorf("beside %q: speed %v, want %v", c.neighbours, got, c.want)
		}
	}
	if got := sharedSpeed(FakeGPU{Model: "lstm", Pairs: pairs}, []string{"resnet"}); got != 0.8 {
		t.Errorf("lstm beside resnet: %v, want 0.8 (the pair read the other way)", got)
	}
	g.SharedSpeed = 0.9
	if got := sharedSpeed(g, []string{"lstm"}); got != 0.9 {
		t.Errorf("-shared-speed 0.9 beside lstm: %v; the flag overrides the table", got)
	}
}

// A record's model is bounded: a neighbour cannot feed the agent or a
// job's log an unbounded or control-character name.
func TestFakeGPURecordModelIsBounded(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []string{strings.Repeat("m", fakegpu.MaxModel+1), "a\nb"} {
		os.WriteFile(filepath.Join(dir, "1.json"), []byte(fmt.Sprintf(`{"pid":1,"gpus":[0],"model":%q}`, m)), 0o644)
		if _, err := fakegpu.Read(filepath.Join(dir, "1.json")); !errors.Is(err, fakegpu.ErrMalformed) {
			t.Errorf("model %.20q: %v, want ErrMalformed", m, err)
		}
	}
	fakegpu.Write(dir, fakegpu.Record{PID: 1, GPUs: []int{0}, Model: "ResNet-18/bs64"})
	if f, err := fakegpu.Read(filepath.Join(dir, "1.json")); err != nil || f.Model != "ResNet-18/bs64" {
		t.Fatalf("%+v %v", f, err)
	}
}

func TestMemNowFollowsTheMemoryFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file string
		want       float64
		err        bool
	}{
		{"no file named: -fake-gpu-mem-mb", "", 1024, false},
		{"a file not there (yet): -fake-gpu-mem-mb", filepath.Join(dir, "absent"), 1024, false},
		{"the file's number", write("grown", " 20000\n"), 20000, false},
		{"not a number: refused", write("text", "lots"), 1024, true},
		{"NaN: refused", write("nan", "NaN"), 1024, true},
		{"more than a fake GPU holds: refused", write("huge", "81921"), 1024, true},
		{"negative: refused", write("neg", "-1"), 1024, true},
		{"a long file: refused unread", write("long", strings.Repeat("1", maxMemFile+1)), 1024, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := memNow(FakeGPU{MemMB: 1024, MemFile: tc.file})
			if got != tc.want || (err != nil) != tc.err {
				t.Fatalf("memNow = %v, %v; want %v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
