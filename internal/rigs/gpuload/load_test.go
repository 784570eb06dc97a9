package gpuload

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeClock is time that passes only when the fake GPU computes or the
// load sleeps.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		c.t = c.t.Add(d)
	}
	return nil
}

// fakeGPU runs a kernel of n iterations in n*perIter of the clock's time;
// delay, if set, adds time to the k-th kernel (another process's kernels
// ahead of ours).
type fakeGPU struct {
	clock    *fakeClock
	perIter  time.Duration
	delay    func(k int) time.Duration
	queued   []uint32
	launched int
	failAt   int // the launch that fails, 1-based; 0: none
}

func (g *fakeGPU) Launch(iters uint32) error {
	g.launched++
	if g.launched == g.failAt {
		return errors.New("cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED")
	}
	g.queued = append(g.queued, iters)
	return nil
}

func (g *fakeGPU) Sync() error {
	for _, n := range g.queued {
		g.clock.t = g.clock.t.Add(time.Duration(n) * g.perIter)
	}
	if g.delay != nil {
		g.clock.t = g.clock.t.Add(g.delay(g.launched))
	}
	g.queued = g.queued[:0]
	return nil
}

func newFake(perIter time.Duration) (*fakeGPU, *fakeClock) {
	c := &fakeClock{t: time.Unix(1e9, 0)}
	return &fakeGPU{clock: c, perIter: perIter}, c
}

func TestPlanFor(t *testing.T) {
	for _, tc := range []struct {
		name           string
		busy           float64
		period, kernel time.Duration
		want           Plan
	}{
		{"sixty percent is twelve kernels of five ms", 60, 100 * time.Millisecond, 5 * time.Millisecond, Plan{12, 5 * time.Millisecond}},
		{"a share that is no whole number of kernels shortens them", 33, 100 * time.Millisecond, 5 * time.Millisecond, Plan{7, 33 * time.Millisecond / 7}},
		{"a full period is kernels back to back", 100, 100 * time.Millisecond, 10 * time.Millisecond, Plan{10, 10 * time.Millisecond}},
		{"a share under one kernel is one short kernel", 1, 100 * time.Millisecond, 5 * time.Millisecond, Plan{1, time.Millisecond}},
		{"zero is memory only", 0, 100 * time.Millisecond, 5 * time.Millisecond, Plan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanFor(tc.busy, tc.period, tc.kernel)
			if got != tc.want {
				t.Fatalf("PlanFor(%v, %v, %v) = %+v, want %+v", tc.busy, tc.period, tc.kernel, got, tc.want)
			}
			if want := time.Duration(tc.busy / 100 * float64(tc.period)); got.Busy() < want-time.Duration(got.Kernels) || got.Busy() > want {
				t.Fatalf("busy %v, want %v", got.Busy(), want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{BusyPct: 60, MemMiB: 2048, Duration: time.Minute, Period: DefaultPeriod, Kernel: DefaultKernel}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		flag string
	}{
		{"busy over 100 is refused", func(c *Config) { c.BusyPct = 120 }, "-busy"},
		{"negative busy is refused", func(c *Config) { c.BusyPct = -1 }, "-busy"},
		{"negative memory is refused", func(c *Config) { c.MemMiB = -1 }, "-mem-mib"},
		{"more than a TiB is refused", func(c *Config) { c.MemMiB = maxMemMiB + 1 }, "-mem-mib"},
		{"no duration is refused", func(c *Config) { c.Duration = 0 }, "-duration"},
		{"a period under 10ms is refused", func(c *Config) { c.Period = time.Millisecond }, "-period"},
		{"a kernel longer than the period is refused", func(c *Config) { c.Kernel = time.Second }, "-kernel"},
		{"a negative GPU is refused", func(c *Config) { c.GPU = -1 }, "-gpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("Validate = %v, want an error naming %s", err, tc.flag)
			}
		})
	}
}

func TestCalibrateAimsAtTheKernelLength(t *testing.T) {
	gpu, clock := newFake(20 * time.Nanosecond)
	iters, err := Calibrate(context.Background(), gpu, clock, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint32(5 * time.Millisecond / (20 * time.Nanosecond)); iters != want {
		t.Fatalf("iters = %d, want %d", iters, want)
	}
	if clock.t.Sub(time.Unix(1e9, 0)) < warmUp {
		t.Fatalf("calibration took %v, under the warm-up %v", clock.t.Sub(time.Unix(1e9, 0)), warmUp)
	}
}

func TestCalibrateTakesTheFastestLaunchWhenAnotherProcessDelaysSome(t *testing.T) {
	gpu, clock := newFake(20 * time.Nanosecond)
	// Every other kernel waits 3 ms behind another process's.
	gpu.delay = func(k int) time.Duration {
		if k%2 == 0 {
			return 3 * time.Millisecond
		}
		return 0
	}
	iters, err := Calibrate(context.Background(), gpu, clock, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint32(250000); iters != want {
		t.Fatalf("iters = %d, want %d (the undelayed rate)", iters, want)
	}
}

func TestCalibrateFailsOnALaunchError(t *testing.T) {
	gpu, clock := newFake(20 * time.Nanosecond)
	gpu.failAt = 3
	if _, err := Calibrate(context.Background(), gpu, clock, 5*time.Millisecond); err == nil || !strings.Contains(err.Error(), "LAUNCH_FAILED") {
		t.Fatalf("err = %v, want the launch failure", err)
	}
}

func TestRunKeepsTheBusyShareOfEveryPeriod(t *testing.T) {
	gpu, clock := newFake(time.Nanosecond)
	plan := PlanFor(60, 100*time.Millisecond, 5*time.Millisecond)
	iters := uint32(plan.KernelLen / time.Nanosecond)
	st, err := Run(context.Background(), gpu, clock, plan, iters, 100*time.Millisecond, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if st.Periods != 100 || st.Kernels != 1200 || st.Overruns != 0 {
		t.Fatalf("stats %+v, want 100 periods, 1200 kernels, no overrun", st)
	}
	if st.GPUWait != 6*time.Second || st.Elapsed != 10*time.Second || st.WorkPct(plan.KernelLen) != 60 {
		t.Fatalf("GPU wait %v of %v, work %.1f%%: want 6s of 10s, 60%%", st.GPUWait, st.Elapsed, st.WorkPct(plan.KernelLen))
	}
}

func TestRunDoesNotMakeUpForALongPeriod(t *testing.T) {
	gpu, clock := newFake(time.Nanosecond)
	plan := PlanFor(60, 100*time.Millisecond, 5*time.Millisecond)
	// Each period's kernels wait 80 ms behind another process's: 140 ms
	// of work a period, so every period overruns and none is skipped.
	gpu.delay = func(int) time.Duration { return 80 * time.Millisecond }
	st, err := Run(context.Background(), gpu, clock, plan, uint32(plan.KernelLen), 100*time.Millisecond, 1400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if st.Periods != 10 || st.Overruns != 10 || st.Kernels != 120 {
		t.Fatalf("stats %+v, want 10 periods all overrun, 120 kernels", st)
	}
	// It waited on the GPU all the time, but did 60 ms of work every
	// 140 ms: 42.9%.
	if w := st.WorkPct(plan.KernelLen); st.GPUWait != st.Elapsed || w < 42.8 || w > 42.9 {
		t.Fatalf("GPU wait %v of %v, work %.2f%%: want all of it, 42.9%%", st.GPUWait, st.Elapsed, w)
	}
}

func TestRunMemoryOnlyLaunchesNothing(t *testing.T) {
	gpu, clock := newFake(time.Nanosecond)
	st, err := Run(context.Background(), gpu, clock, Plan{}, 0, 100*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if gpu.launched != 0 || st.Kernels != 0 || st.Elapsed != time.Second {
		t.Fatalf("launched %d, stats %+v: want nothing launched for 1s", gpu.launched, st)
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	gpu, clock := newFake(time.Nanosecond)
	ctx, cancel := context.WithCancel(context.Background())
	plan := PlanFor(50, 100*time.Millisecond, 5*time.Millisecond)
	gpu.delay = func(k int) time.Duration {
		if k >= 30 {
			cancel()
		}
		return 0
	}
	st, err := Run(ctx, gpu, clock, plan, uint32(plan.KernelLen), 100*time.Millisecond, time.Hour)
	if err != nil {
		t.Fatalf("a stop is no error: %v", err)
	}
	if st.Periods != 3 {
		t.Fatalf("periods %d, want 3 (cancelled in the third)", st.Periods)
	}
}

func TestRunReturnsALaunchError(t *testing.T) {
	gpu, clock := newFake(time.Nanosecond)
	gpu.failAt = 5
	plan := PlanFor(50, 100*time.Millisecond, 5*time.Millisecond)
	if _, err := Run(context.Background(), gpu, clock, plan, 1000, 100*time.Millisecond, time.Second); err == nil {
		t.Fatal("a failed launch went unreported")
	}
}

func TestOpenDriverWithoutTheLibraryNamesIt(t *testing.T) {
	// Many times, from goroutines on other threads too: dlerror's
	// message is per thread, so it must be read beside the dlopen.
	for i := 0; i < 50; i++ {
		_, err := OpenDriver("/nonexistent/libcuda.so.1")
		if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1: cannot open shared object file") ||
			!strings.Contains(err.Error(), "NVIDIA driver") {
			t.Fatalf("try %d: err = %v, want ErrNoDriver with dlopen's reason naming the path", i, err)
		}
		runtime.Gosched()
	}
}

func TestOpenDriverRefusesALibraryThatIsNotCUDA(t *testing.T) {
	_, err := OpenDriver("libc.so.6")
	if err == nil || errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "lacks cuInit") {
		t.Fatalf("err = %v, want 'libc.so.6 lacks cuInit'", err)
	}
}

func TestLoadRefusesABadConfigBeforeTouchingTheDriver(t *testing.T) {
	var out strings.Builder
	err := Load(context.Background(), Config{BusyPct: 200, Library: "/nonexistent/libcuda.so.1"}, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "-busy") || errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want the config refused first", err)
	}
	if out.Len() != 0 {
		t.Fatalf("printed %q before failing", out.String())
	}
}
