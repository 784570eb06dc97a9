package synth

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// gpuClock is what onFakeGPU reads and sets of the job's GPU: the time
// its steps kept the GPU busy so far, and its speed beside its
// neighbours from now on. Two clocks: the loaders' run (loopClock, the
// GPU step waits for samples the loaders computed) and device time
// (pace, the model's rates in wall time).
type gpuClock interface {
	busyAt(now time.Time) time.Duration
	setSpeed(now time.Time, speed float64)
}

var (
	_ gpuClock = loopClock{}
	_ gpuClock = (*pace)(nil)
)

// loopClock is gpu()'s: the busy time it added up, the speed its next
// step takes (a float64's bits).
type loopClock struct {
	busy  *atomic.Int64
	speed *atomic.Uint64
}

func (c loopClock) busyAt(time.Time) time.Duration      { return time.Duration(c.busy.Load()) }
func (c loopClock) setSpeed(_ time.Time, speed float64) { c.speed.Store(f64bits(speed)) }

// pace is a job's progress in device time (Config.DeviceTime): its steps
// and its GPU's busy time advance with the wall clock at the model's
// rates, which change only when its speed beside its neighbours does.
// A step takes the longer of its GPU time (StepCost at speed 1, divided
// by the speed) and its batch's input time (Batch samples from
// min(Workers, Knee) loaders at Spin each, overlapped with the GPU as a
// prefetching loader is): the throughput the model gives a job whose
// loaders get every core they ask for. Nothing here waits for a CPU, so
// a loaded host neither slows the job nor hides a slowdown; the job's
// rate and utilisation are what its fake GPU's model of co-location
// (the speed, from the pair table) makes them. Safe for concurrent use.
type pace struct {
	gpuStep time.Duration
	input   time.Duration
	// limit: the step count the run stops at (0: none).
	limit int64

	mu    sync.Mutex
	at    time.Time
	speed float64
	steps float64 // done, fractional
	busy  float64 // ns of GPU time so far
}

// newPace starts a job's device time at now with done steps (a
// checkpoint's) and speed 1.
func newPace(cfg Config, done int64, now time.Time) *pace {
	loaders := min(float64(cfg.Workers), cfg.Knee)
	return &pace{
		gpuStep: cfg.StepCost(),
		input:   time.Duration(float64(cfg.Batch) * float64(cfg.Spin) / loaders),
		limit:   int64(cfg.Steps),
		at:      now, speed: 1, steps: float64(done),
	}
}

// advanceLocked brings p to now at its current speed (a clock that went
// back adds nothing).
func (p *pace) advanceLocked(now time.Time) {
	dt := float64(now.Sub(p.at))
	if dt <= 0 {
		return
	}
	gpu := float64(p.gpuStep) / p.speed
	step := max(gpu, float64(p.input))
	p.steps += dt / step
	p.busy += dt * gpu / step
	p.at = now
}

// setSpeed implements gpuClock: the steps until now ran at the old
// speed, the ones after at speed (ignored unless in (0, 1]).
func (p *pace) setSpeed(now time.Time, speed float64) {
	if !(speed > 0 && speed <= 1) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
	p.speed = speed
}

// busyAt implements gpuClock.
func (p *pace) busyAt(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
	return time.Duration(p.busy)
}

// count is the whole steps done at now, at most the limit.
func (p *pace) count(now time.Time) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked(now)
	n := int64(p.steps)
	if p.limit > 0 {
		n = min(n, p.limit)
	}
	return n
}

// left is how long until the limit is reached at the current speed (0
// once it is; a day when there is none, ctx ends the run then).
func (p *pace) left(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.limit == 0 {
		return 24 * time.Hour
	}
	p.advanceLocked(now)
	if rest := float64(p.limit) - p.steps; rest > 0 {
		return time.Duration(math.Ceil(rest * max(float64(p.gpuStep)/p.speed, float64(p.input))))
	}
	return 0
}

// run waits until the limit is reached or ctx ends, looking again at
// every refresh of the fake GPU (a speed change moves the end).
func (p *pace) run(ctx context.Context, refresh time.Duration) {
	timer := time.NewTimer(0)
	<-timer.C
	for {
		d := p.left(time.Now())
		if d <= 0 {
			return
		}
		timer.Reset(min(d, refresh))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
	}
}
