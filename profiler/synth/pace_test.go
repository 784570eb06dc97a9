package synth

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
)

// In device time a job's rate and utilisation are the model's: alone, a
// GPU-bound job (one loader, knee 0.25) runs a step per GPU step at 100%;
// an input-bound one (one loader, knee 4) a step per batch's input time
// at the GPU step's share of it. At half speed beside a neighbour the
// GPU-bound job halves its rate and stays at 100%; the input-bound one
// keeps its rate and its GPU is busy twice as long.
func TestDeviceTimeRateAndUtilisationAreTheModels(t *testing.T) {
	for _, c := range []struct {
		name                 string
		knee                 float64
		speed                float64
		wantRate, wantUtilPc float64
	}{
		// Batch 4, Spin 2 ms: the GPU step is 32 ms at knee 0.25, 2 ms at
		// knee 4; one loader reads a batch in 8 ms.
		{"GPU-bound alone: a step per GPU step", 0.25, 1, 31.25, 100},
		{"GPU-bound at half speed: half the rate", 0.25, 0.5, 15.625, 100},
		{"input-bound alone: a step per batch read", 4, 1, 125, 25},
		{"input-bound at half speed: the same rate, twice the GPU time", 4, 0.5, 125, 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Config{Knee: c.knee, Workers: 1, DeviceTime: true}.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(1000, 0)
			p := newPace(cfg, 7, t0)
			p.setSpeed(t0, c.speed)
			const secs = 8
			end := t0.Add(secs * time.Second)
			rate := float64(p.count(end)-7) / secs
			util := 100 * p.busyAt(end).Seconds() / secs
			if math.Abs(rate-c.wantRate) > 1.0/secs || math.Abs(util-c.wantUtilPc) > 1e-6 {
				t.Fatalf("%.3f steps/s at %.3f%%; want %v at %v%%", rate, util, c.wantRate, c.wantUtilPc)
			}
		})
	}
}

// A change of speed applies from its time on: the steps before it ran at
// the old speed. A clock that went back adds nothing, and the limit caps
// the count.
func TestDeviceTimeSpeedChangesApplyFromTheirTime(t *testing.T) {
	cfg, err := Config{Knee: 1, Workers: 1, Batch: 1, Spin: 10 * time.Millisecond, Steps: 250, DeviceTime: true}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	p := newPace(cfg, 0, t0)
	p.setSpeed(t0.Add(time.Second), 0.5) // 100 steps at 100/s
	if n := p.count(t0.Add(2 * time.Second)); n != 150 {
		t.Fatalf("%d steps after 1 s at full speed and 1 s at half; want 150", n)
	}
	if n := p.count(t0); n != 150 {
		t.Fatalf("a clock that went back: %d steps, want 150", n)
	}
	p.setSpeed(t0.Add(2*time.Second), 0)   // out of range: ignored
	p.setSpeed(t0.Add(2*time.Second), 1.5) // so is a speed-up
	if d := p.left(t0.Add(2 * time.Second)); d != 2*time.Second {
		t.Fatalf("100 steps left at 50/s: %v, want 2s", d)
	}
	if n := p.count(t0.Add(time.Hour)); n != 250 {
		t.Fatalf("an hour later: %d steps; the limit is 250", n)
	}
	if d := p.left(t0.Add(time.Hour)); d != 0 {
		t.Fatalf("past the limit: %v left", d)
	}
}

// The fake GPU's record drives device time: a neighbour's record on the
// job's GPU sets the pace's speed, and the job's record carries the
// model's utilisation.
func TestDeviceTimeFollowsTheFakeGPUsNeighbours(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Config{Knee: 0.25, Workers: 1, DeviceTime: true,
		FakeGPU: FakeGPU{Dir: dir, GPUs: []int{0}, MemMB: 512, SharedSpeed: 0.5}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	p := newPace(cfg, 0, time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		onFakeGPU(ctx, cfg.FakeGPU, p, func(string, ...any) {})
	}()
	defer func() { cancel(); <-done }()
	// pid 1 lives: a neighbour on GPU 0.
	if err := fakegpu.Write(dir, fakegpu.Record{PID: 1, GPUs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fakegpu.FileName(os.Getpid()))
	deadline := time.Now().Add(30 * time.Second)
	for {
		p.mu.Lock()
		speed := p.speed
		p.mu.Unlock()
		r, err := fakegpu.Read(path)
		if speed == 0.5 && err == nil && r.UtilPct == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("speed %v, record %+v (%v); want speed 0.5 and a GPU-bound job's 100%%", speed, r.Record, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The point of device time: a run on a host whose CPUs are all taken
// reports the model's rate, every line of it (the count and its time are
// read together; only the whole steps round it).
func TestDeviceTimeRunReportsTheModelsRateOnABusyHost(t *testing.T) {
	if testing.Short() {
		t.Skip("takes every CPU for a second")
	}
	var spin atomic.Bool
	spin.Store(true)
	var wg sync.WaitGroup
	for range 2 * runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for spin.Load() {
			}
		}()
	}
	var out syncBuffer
	// One loader at knee 1 and 1 µs a sample, batch 1: a million steps/s,
	// so that a step either way is a small part of any interval.
	err := Run(context.Background(), Config{Knee: 1, Batch: 1, Spin: time.Microsecond, DeviceTime: true,
		DataPath: filepath.Join(t.TempDir(), "d"), DataBytes: 1 << 20,
		Duration: time.Second, Report: 200 * time.Millisecond, Out: &out, Log: &syncBuffer{}})
	spin.Store(false)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("%d lines in a second at 200 ms: %q", len(lines), out.String())
	}
	for _, l := range lines {
		m := progressLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not a throughput line", l)
		}
		if r, _ := strconv.ParseFloat(m[2], 64); math.Abs(r-1e6) > 0.02*1e6 {
			t.Fatalf("line %q: want the model's 1000000 it/s on a busy host", l)
		}
	}
}

// Device time spends no loader time, so waiting on slow storage
// (-io-wait) is refused with it rather than ignored.
func TestDeviceTimeRefusesIOWait(t *testing.T) {
	if _, err := (Config{Knee: 1, IOWait: true, DeviceTime: true}).withDefaults(); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("io-wait with device time: %v, want ErrBadConfig", err)
	}
	if _, err := (Config{Knee: 1e9, DeviceTime: true}).withDefaults(); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("a GPU step under a microsecond in device time: %v, want ErrBadConfig", err)
	}
}
