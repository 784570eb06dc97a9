package synth

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
)

// ErrBadConfig is wrapped by every error about an invalid Config.
var ErrBadConfig = errors.New("synth: bad config")

// Config describes one synthetic training run.
type Config struct {
	// Knee is the number of cores of loader work that saturate the GPU
	// step; fractional knees are allowed.
	Knee float64
	// Workers is the number of loader workers; 0 means ⌈Knee⌉, the fewest
	// that can reach the knee.
	Workers int
	// Spin is the CPU time a loader spends on one sample.
	Spin time.Duration
	// Batch is the number of samples per GPU step.
	Batch int
	// SampleBytes is how much of the dataset one sample reads.
	SampleBytes int
	// DataPath is the dataset file; it is created with DataBytes of
	// pseudo-random bytes if it does not exist. "" means a file of that
	// size under the temporary directory, shared between runs.
	DataPath  string
	DataBytes int64
	// Duration and Steps bound the run; zero means no bound of that kind.
	// The run also ends when its context is cancelled.
	Duration time.Duration
	Steps    int
	// Report is the interval between throughput lines.
	Report time.Duration
	// IOWait: loaders wait Spin per sample (reading from slow storage)
	// instead of computing it, so a job with fewer loaders than its knee
	// leaves its GPU partly idle without keeping CPUs busy (the demo's
	// input-bound jobs, many of them on a small machine).
	IOWait bool
	// DeviceTime: the job's steps follow the model in wall time (pace.go)
	// instead of waiting for samples its loaders computed: its rate and
	// its GPU's utilisation are the model's (min(Workers, Knee) cores of
	// loaders, the GPU step, the fake GPU's speed beside its neighbours)
	// whatever the host's CPUs are doing. No loader runs and no CPU time
	// is spent per sample, so IOWait is refused with it. For the sharing
	// tests, whose introspection must see the pair table's slowdown and
	// nothing else on a loaded machine.
	DeviceTime bool
	// Checkpoint, if set, is a file holding the steps done so far: the run
	// resumes from it and keeps it current, so a job that Slurm requeues
	// counts Steps across its runs.
	Checkpoint string
	// FakeGPU, when its Dir is set, runs the job on the node agent's fake
	// GPU device (fakegpu.go).
	FakeGPU FakeGPU
	// Out receives the throughput lines; Log the start-up banner. nil
	// means os.Stdout and os.Stderr.
	Out, Log io.Writer
}

// Defaults: 2 ms of CPU per sample and 4 samples per step give about 125
// steps per second per core, enough steps per report interval for a rate
// with ~1% resolution.
const (
	DefaultSpin        = 2 * time.Millisecond
	DefaultBatch       = 4
	DefaultSampleBytes = 64 << 10
	DefaultDataBytes   = 64 << 20
	DefaultReport      = 500 * time.Millisecond
)

// minDeviceStep bounds device time's steps per second (a million: what
// the node agent takes as a rate, wire.MaxItersPerSec).
const minDeviceStep = time.Microsecond

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if !(c.Knee > 0) || math.IsInf(c.Knee, 0) {
		return c, fmt.Errorf("%w: knee %v must be a positive number of cores", ErrBadConfig, c.Knee)
	}
	if c.Workers == 0 {
		c.Workers = int(math.Ceil(c.Knee))
	}
	if c.Spin == 0 {
		c.Spin = DefaultSpin
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.SampleBytes == 0 {
		c.SampleBytes = DefaultSampleBytes
	}
	if c.DataBytes == 0 {
		c.DataBytes = DefaultDataBytes
	}
	if c.Report == 0 {
		c.Report = DefaultReport
	}
	switch {
	case c.Workers < 0:
		return c, fmt.Errorf("%w: %d workers", ErrBadConfig, c.Workers)
	case c.Spin < 0 || c.Batch < 0 || c.SampleBytes < 0 || c.DataBytes < 0 || c.Report < 0:
		return c, fmt.Errorf("%w: spin, batch, sample size, data size and report interval must not be negative", ErrBadConfig)
	case c.Duration < 0 || c.Steps < 0:
		return c, fmt.Errorf("%w: duration and steps must not be negative", ErrBadConfig)
	case c.DeviceTime && c.IOWait:
		return c, fmt.Errorf("%w: io-wait with device time: device time spends no loader time, it models it", ErrBadConfig)
	case c.DeviceTime && c.StepCost() < minDeviceStep:
		return c, fmt.Errorf("%w: a GPU step of %v in device time; at least %v", ErrBadConfig, c.StepCost(), minDeviceStep)
	}
	if c.FakeGPU.Dir != "" {
		g := c.FakeGPU
		switch {
		case len(g.GPUs) == 0:
			return c, ErrNoFakeGPU
		case !(g.MemMB >= 0 && g.MemMB <= fakegpu.MemTotalMB):
			return c, fmt.Errorf("%w: fake GPU memory %v MB outside 0..%d", ErrBadConfig, g.MemMB, fakegpu.MemTotalMB)
		case !(g.SharedSpeed >= 0 && g.SharedSpeed <= 1):
			return c, fmt.Errorf("%w: shared speed %v outside 0..1", ErrBadConfig, g.SharedSpeed)
		case len(g.Model) > fakegpu.MaxModel || strings.IndexFunc(g.Model, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return c, fmt.Errorf("%w: model name of %d bytes or with control characters", ErrBadConfig, len(g.Model))
		}
	}
	if c.DataPath == "" {
		c.DataPath = filepath.Join(os.TempDir(), fmt.Sprintf("lachesis-synth-%d.dat", c.DataBytes))
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	return c, nil
}

// StepCost is the GPU step's fixed duration: Batch samples at Spin each,
// spread over Knee cores.
func (c Config) StepCost() time.Duration {
	return time.Duration(float64(c.Batch) * float64(c.Spin) / c.Knee)
}
