package gpuload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// Config is one load: how busy the GPU is kept, how much of its memory is
// held, for how long.
type Config struct {
	// BusyPct is the share of each period the GPU runs spin kernels,
	// 0..100 (0: memory only).
	BusyPct float64
	// MemMiB is the device memory allocated and held, beside the few KiB
	// of the kernel's output.
	MemMiB int
	// Duration of the load, after the start-up (allocation, calibration).
	Duration time.Duration
	// Period is one busy-then-idle cycle.
	Period time.Duration
	// Kernel is the length one spin kernel is calibrated to; a period's
	// busy share is a whole number of them, each shortened to fit.
	Kernel time.Duration
	// GPU is the CUDA device index.
	GPU int
	// Library is the CUDA driver library (DefaultLibrary when empty).
	Library string
}

// Defaults of the flags of lachesis-gpuload.
const (
	DefaultPeriod = 100 * time.Millisecond
	DefaultKernel = 5 * time.Millisecond
)

// Bounds of Config, so that a typo cannot ask for a terabyte or a year.
const (
	maxMemMiB   = 1 << 20 // 1 TiB
	maxDuration = 24 * time.Hour
	minPeriod   = 10 * time.Millisecond
	maxPeriod   = 10 * time.Second
	minKernel   = 100 * time.Microsecond
)

// Validate says what is wrong with c, naming the flag.
func (c Config) Validate() error {
	var errs []error
	if math.IsNaN(c.BusyPct) || c.BusyPct < 0 || c.BusyPct > 100 {
		errs = append(errs, fmt.Errorf("-busy %v: want a percentage from 0 to 100", c.BusyPct))
	}
	if c.MemMiB < 0 || c.MemMiB > maxMemMiB {
		errs = append(errs, fmt.Errorf("-mem-mib %d: want 0 to %d", c.MemMiB, maxMemMiB))
	}
	if c.Duration <= 0 || c.Duration > maxDuration {
		errs = append(errs, fmt.Errorf("-duration %v: want more than 0 and at most %v", c.Duration, maxDuration))
	}
	if c.Period < minPeriod || c.Period > maxPeriod {
		errs = append(errs, fmt.Errorf("-period %v: want %v to %v", c.Period, minPeriod, maxPeriod))
	}
	if c.Kernel < minKernel || c.Kernel > c.Period {
		errs = append(errs, fmt.Errorf("-kernel %v: want %v up to the period (%v)", c.Kernel, minKernel, c.Period))
	}
	if c.GPU < 0 {
		errs = append(errs, fmt.Errorf("-gpu %d: want a CUDA device index", c.GPU))
	}
	return errors.Join(errs...)
}

// Plan is a period's GPU work: Kernels spin kernels of KernelLen each.
type Plan struct {
	Kernels   int
	KernelLen time.Duration
}

// Busy is the GPU time the plan asks for in one period.
func (p Plan) Busy() time.Duration { return time.Duration(p.Kernels) * p.KernelLen }

// PlanFor splits busyPct of period into the fewest kernels no longer than
// kernel, all of one length, so the busy share is exact.
func PlanFor(busyPct float64, period, kernel time.Duration) Plan {
	busy := time.Duration(math.Round(busyPct / 100 * float64(period)))
	if busy <= 0 || kernel <= 0 {
		return Plan{}
	}
	n := int((busy + kernel - 1) / kernel)
	return Plan{Kernels: n, KernelLen: busy / time.Duration(n)}
}

// Device is what the load runs on: the GPU (*GPU), or a fake in tests.
type Device interface {
	// Launch queues one spin kernel of iters rounds.
	Launch(iters uint32) error
	// Sync waits for every queued kernel.
	Sync() error
}

// Clock is the time the load keeps: the real one, or a fake in tests.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or returns ctx's error when it is done first.
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock.
type RealClock struct{}

var _ Clock = RealClock{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep implements Clock.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Calibration bounds.
const (
	// warmUp of back-to-back kernels first raises the GPU's clocks from
	// idle, so the rate measured is the loaded one.
	warmUp = 300 * time.Millisecond
	// probeLen: a kernel at least this long measures the rate well
	// enough to aim at the target; launch overheads are microseconds.
	probeLen    = time.Millisecond
	probeRounds = 8
	firstIters  = 1 << 10
	maxIters    = 1 << 31
)

// Calibrate finds the iterations of one spin kernel of length target: it
// doubles a kernel until it lasts probeLen and the warm-up has passed, then
// aims at target twice, each time from the fastest of probeRounds launches
// (the fastest, because another process's kernels can only delay ours).
func Calibrate(ctx context.Context, dev Device, clock Clock, target time.Duration) (uint32, error) {
	if target <= 0 {
		return 0, fmt.Errorf("calibrate: kernel length %v", target)
	}
	timed := func(iters uint32) (time.Duration, error) {
		t0 := clock.Now()
		if err := dev.Launch(iters); err != nil {
			return 0, err
		}
		if err := dev.Sync(); err != nil {
			return 0, err
		}
		return clock.Now().Sub(t0), nil
	}
	start := clock.Now()
	iters := uint32(firstIters)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		took, err := timed(iters)
		if err != nil {
			return 0, err
		}
		if took >= probeLen && clock.Now().Sub(start) >= warmUp {
			break
		}
		if took < probeLen {
			if iters >= maxIters/2 {
				return 0, fmt.Errorf("calibrate: %d iterations took only %v", iters, took)
			}
			iters *= 2
		}
	}
	for aim := 0; aim < 2; aim++ {
		best := time.Duration(math.MaxInt64)
		for i := 0; i < probeRounds; i++ {
			took, err := timed(iters)
			if err != nil {
				return 0, err
			}
			best = min(best, took)
		}
		if best <= 0 {
			return 0, fmt.Errorf("calibrate: %d iterations took no measurable time", iters)
		}
		next := math.Round(float64(iters) * float64(target) / float64(best))
		iters = uint32(min(max(next, 1), maxIters))
	}
	return iters, nil
}

// Stats is what a load did.
type Stats struct {
	Periods int
	Kernels int
	// GPUWait is the wall time spent waiting for the period's kernels:
	// about the busy share when the GPU is ours alone, more when another
	// process's kernels delayed ours.
	GPUWait time.Duration
	// Overruns counts periods whose kernels outlasted the period.
	Overruns int
	Elapsed  time.Duration
}

// WorkPct is the GPU time the load's kernels took, at their calibrated
// length, as a share of the elapsed time: what the load really did, the
// truth the driver's per-process utilisation is held to. Unlike GPUWait
// it does not grow when another process's kernels delay ours.
func (s Stats) WorkPct(kernelLen time.Duration) float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return 100 * float64(s.Kernels) * kernelLen.Seconds() / s.Elapsed.Seconds()
}

// Run keeps the device busy for plan's kernels of iters rounds every
// period until duration has passed or ctx is done (a stop, not an error).
// A period whose work runs long is not made up for: the next starts at once.
func Run(ctx context.Context, dev Device, clock Clock, plan Plan, iters uint32, period, duration time.Duration) (Stats, error) {
	var st Stats
	start := clock.Now()
	end := start.Add(duration)
	next := start
	for clock.Now().Before(end) {
		st.Periods++
		if plan.Kernels > 0 {
			t0 := clock.Now()
			for k := 0; k < plan.Kernels; k++ {
				if err := dev.Launch(iters); err != nil {
					return st, err
				}
			}
			if err := dev.Sync(); err != nil {
				return st, err
			}
			st.Kernels += plan.Kernels
			st.GPUWait += clock.Now().Sub(t0)
		}
		next = next.Add(period)
		now := clock.Now()
		if !next.After(now) {
			st.Overruns++
			next = now
		}
		wake := next
		if end.Before(wake) {
			wake = end
		}
		if err := clock.Sleep(ctx, wake.Sub(now)); err != nil {
			break
		}
	}
	st.Elapsed = clock.Now().Sub(start)
	return st, nil
}

// Load is lachesis-gpuload: it opens GPU cfg.GPU through the driver,
// holds cfg.MemMiB, calibrates the kernel, prints one "ready" line to w
// (what the GPU check waits for), waits for go when it is not nil (so
// that two loaders each calibrate on an idle GPU) and runs the duty cycle,
// then prints what it did. It must run on one goroutine throughout (CUDA's
// context is current on one OS thread; Open locks it).
func Load(ctx context.Context, cfg Config, w io.Writer, start <-chan struct{}) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	drv, err := OpenDriver(cfg.Library)
	if err != nil {
		return err
	}
	gpu, err := drv.Open(cfg.GPU)
	if err != nil {
		return err
	}
	if err := gpu.Hold(cfg.MemMiB); err != nil {
		return err
	}
	plan := PlanFor(cfg.BusyPct, cfg.Period, cfg.Kernel)
	var iters uint32
	if plan.Kernels > 0 {
		if iters, err = Calibrate(ctx, gpu, RealClock{}, plan.KernelLen); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "ready pid=%d gpu=%d name=%q sms=%d cuda_driver=%d mem_mib=%d busy_pct=%g kernels=%d kernel=%v iters=%d period=%v\n",
		os.Getpid(), cfg.GPU, gpu.Name, gpu.SMs, gpu.Driver, cfg.MemMiB, cfg.BusyPct, plan.Kernels, plan.KernelLen, iters, cfg.Period)
	if start != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-start:
		}
	}
	st, err := Run(ctx, gpu, RealClock{}, plan, iters, cfg.Period, cfg.Duration)
	fmt.Fprintf(w, "done pid=%d periods=%d kernels=%d work=%.1f%% gpu_wait=%.1f%% overruns=%d elapsed=%v\n",
		os.Getpid(), st.Periods, st.Kernels, st.WorkPct(plan.KernelLen), 100*st.GPUWait.Seconds()/max(st.Elapsed.Seconds(), 1e-9),
		st.Overruns, st.Elapsed.Round(time.Millisecond))
	return err
}
