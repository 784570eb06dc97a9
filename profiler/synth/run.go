package synth

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
)

// sink keeps the loaders' hashes alive so the compiler cannot drop the work.
var sink atomic.Uint64

// Run runs the synthetic job until Duration or Steps is reached or ctx is
// cancelled; each of those ends it without error.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	data, err := openDataset(cfg.DataPath, cfg.DataBytes)
	if err != nil {
		return err
	}
	defer data.Close()
	st, err := data.Stat()
	if err != nil {
		return err
	}
	sampleBytes := min(int64(cfg.SampleBytes), st.Size())
	// Every loader thread gets its own P, so the kernel, not Go's scheduler,
	// shares the cores among loaders, as it does among a real job's loader
	// processes; and the GPU and the reporter never wait for a P behind
	// spinning loaders (which made the job slower on more cores).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), cfg.Workers+2)))
	clock := "loaders' CPU time"
	if cfg.DeviceTime {
		clock = "device time"
	}
	fmt.Fprintf(cfg.Log, "lachesis-synth: knee %g cores, %d workers, %v CPU per sample, batch %d, GPU step %v, dataset %s (%d bytes), GOMAXPROCS %d, paced by %s\n",
		cfg.Knee, cfg.Workers, cfg.Spin, cfg.Batch, cfg.StepCost(), cfg.DataPath, st.Size(), runtime.GOMAXPROCS(0), clock)

	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()

	done, err := readCheckpoint(cfg.Checkpoint)
	if err != nil {
		return err
	}
	var steps atomic.Int64
	steps.Store(done)
	var loadErr <-chan error
	if cfg.DeviceTime {
		p := newPace(cfg, done, time.Now())
		runSteps(ctx, cfg, p, p.count, func() { p.run(ctx, fakegpu.Refresh) })
		steps.Store(p.count(time.Now()))
	} else {
		loadErr = runLoaders(ctx, stop, cfg, data, st.Size(), sampleBytes, &steps)
	}
	if err := writeCheckpoint(cfg.Checkpoint, steps.Load()); err != nil {
		return err
	}
	fmt.Fprintf(cfg.Log, "lachesis-synth: done, %d steps\n", steps.Load())
	select {
	case err := <-loadErr:
		return err
	default:
		return nil
	}
}

// runLoaders runs the job on its loaders' CPU work until ctx ends or
// cfg.Steps is reached (then stop ends the loaders): the GPU step waits
// for the samples they computed. It returns their first error, if any.
func runLoaders(ctx context.Context, stop context.CancelFunc, cfg Config, data *os.File, size, sampleBytes int64, steps *atomic.Int64) <-chan error {
	// Loaders hand the GPU the time each sample became ready; a queue of two
	// batches lets them run ahead of the GPU the way a prefetching data
	// loader does, and blocks them (idle, not spinning) once it is full.
	ready := make(chan time.Time, 2*cfg.Batch)
	var next atomic.Int64
	var wg sync.WaitGroup
	loadErr := make(chan error, cfg.Workers)
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := load(ctx, data, size, sampleBytes, cfg.Spin, cfg.IOWait, &next, ready); err != nil {
				loadErr <- err
				stop()
			}
		}()
	}
	var busy atomic.Int64
	var speed atomic.Uint64
	runSteps(ctx, cfg, loopClock{busy: &busy, speed: &speed}, func(time.Time) int64 { return steps.Load() },
		func() { gpu(ctx, cfg, ready, steps, &busy, &speed) })
	stop()
	wg.Wait()
	return loadErr
}

// runSteps runs steps (until the run ends) beside the reporter, which
// prints count, and the fake GPU's record, which reads and sets clock;
// it returns once both have stopped.
func runSteps(ctx context.Context, cfg Config, clock gpuClock, count func(time.Time) int64, steps func()) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		report(ctx, cfg, count)
	}()
	onGPU := make(chan struct{})
	go func() {
		defer close(onGPU)
		if cfg.FakeGPU.Dir != "" {
			onFakeGPU(ctx, cfg.FakeGPU, clock, func(f string, a ...any) { fmt.Fprintf(cfg.Log, f, a...) })
		}
	}()
	steps()
	stop()
	<-reported
	<-onGPU
}

// load is one loader worker. It runs on its own OS thread so that the
// thread's CPU clock measures this worker's work alone.
func load(ctx context.Context, data *os.File, size, sampleBytes int64, spin time.Duration, ioWait bool,
	next *atomic.Int64, ready chan<- time.Time) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]byte, sampleBytes)
	slots := max(size/sampleBytes, 1)
	var h uint64
	defer func() { sink.Add(h) }()
	for {
		i := next.Add(1) - 1
		if _, err := data.ReadAt(buf, (i%slots)*sampleBytes); err != nil {
			return fmt.Errorf("read dataset: %w", err)
		}
		if ioWait {
			time.Sleep(spin)
		} else {
			h = decode(buf, spin, h)
		}
		select {
		case ready <- time.Now():
		case <-ctx.Done():
			return nil
		}
	}
}

// gpu consumes batches and accounts each step on an ideal timeline: a step
// starts when both its last sample is ready and the previous step is done,
// and lasts exactly StepCost (divided by the speed while the job shares
// a fake GPU; busy adds up the steps' durations). Sleeping until the step's end on that
// timeline, rather than sleeping StepCost after waking, keeps timer
// overshoot from slowing the GPU below its nominal rate.
func gpu(ctx context.Context, cfg Config, ready <-chan time.Time, steps, busy *atomic.Int64, speed *atomic.Uint64) {
	cost := cfg.StepCost()
	free := time.Now()
	timer := time.NewTimer(0)
	<-timer.C
	for cfg.Steps == 0 || steps.Load() < int64(cfg.Steps) {
		var last time.Time
		for range cfg.Batch {
			select {
			case last = <-ready:
			case <-ctx.Done():
				return
			}
		}
		start := free
		if last.After(start) {
			start = last
		}
		step := time.Duration(float64(cost) / currentSpeed(speed))
		busy.Add(int64(step))
		free = start.Add(step)
		timer.Reset(time.Until(free))
		select {
		case <-timer.C:
		case <-ctx.Done():
			return
		}
		steps.Add(1)
	}
}

// report prints the step count and the steps per second since the last
// line.
func report(ctx context.Context, cfg Config, count func(time.Time) int64) {
	tick := time.NewTicker(cfg.Report)
	defer tick.Stop()
	lastAt := time.Now()
	last := count(lastAt)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// The count and the time read together: a reporter that
			// woke late does not spread a tick's steps over another's.
			now := time.Now()
			n := count(now)
			if err := writeCheckpoint(cfg.Checkpoint, n); err != nil {
				fmt.Fprintf(cfg.Log, "lachesis-synth: checkpoint: %v\n", err)
			}
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			// Out is unbuffered (or the caller's): each line goes out as it
			// is printed, which the profiler reading a pipe relies on.
			fmt.Fprintf(cfg.Out, "step %d %.1f it/s\n", n, rate)
			last, lastAt = n, now
		}
	}
}

// readCheckpoint is the step count saved in path (0 when path is "" or
// does not exist yet).
func readCheckpoint(path string) (int64, error) {
	if path == "" {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: checkpoint %s holds %q, not a step count", ErrBadConfig, path, b)
	}
	return n, nil
}

// writeCheckpoint saves n in path atomically (a reader or a requeued run
// never sees half a number); nothing when path is "".
func writeCheckpoint(path string, n int64) error {
	if path == "" {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(n, 10)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
