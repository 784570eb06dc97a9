package profiler

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"syscall"
	"time"
)

// Errors callers can tell apart with errors.Is. Every error Profile returns
// wraps one of them or the context's error.
var (
	// ErrBadSpec: the SweepSpec cannot be run as given.
	ErrBadSpec = errors.New("profiler: bad sweep spec")
	// ErrNoThroughput: the workload gave no usable throughput signal (no
	// output line matched the regex, or every reading was zero).
	ErrNoThroughput = errors.New("profiler: no usable throughput from the workload")
	// ErrWorkloadFailed: the workload exited with an error before giving a
	// throughput reading.
	ErrWorkloadFailed = errors.New("profiler: workload failed")
	// ErrNoGPUSignal: GPU utilisation was asked for but cannot be read:
	// no NVIDIA driver (NVML library not found), no GPU, or a build
	// without cgo.
	ErrNoGPUSignal = errors.New("profiler: no GPU utilisation signal")
)

// DefaultRegex matches the throughput in lines like "step 120 12.5 it/s".
const DefaultRegex = `([0-9]+(?:\.[0-9]+)?)\s*it/s`

// DefaultTolerance is the fraction of the best throughput that the sweep
// and the best-case demand may give up. It is Synergy's own sweep
// threshold (10%), not sensitivity.DefaultTolerance (2%): the 2% that
// reproduces Synergy's published best cases from their noise-free table is
// below the noise of sweep points a few seconds to a minute long, and a
// tolerance under the noise makes the best case chase noise toward more
// CPUs.
const DefaultTolerance = 0.1

// DefaultPointDuration suits real training scripts, whose start-up
// (interpreter, framework import, data loader warm-up) takes tens of
// seconds; the first 30% of every point is discarded as warm-up.
const DefaultPointDuration = 60 * time.Second

// SweepSpec says what to profile and how.
type SweepSpec struct {
	// Argv is the workload command. An Argv[0] without a slash is looked up
	// on the PATH of Env, as the user of Credential (LookPath).
	Argv []string
	// Env is the workload's environment; nil means the profiler's own
	// (the agent always passes the caller's, empty if it sent none).
	// LACHESIS_PROFILE_CPUS=<cores of this point> is added either way, so a
	// script can size its data loader to the cores it is given.
	Env []string
	// Dir is the workload's working directory; "" means the profiler's.
	Dir string
	// Regex reads throughput from the workload's output (stdout and
	// stderr; lines end at \n or \r, so progress bars work). Its first
	// capture group is the number. "" means DefaultRegex.
	Regex string
	// UseNVML reads the mean GPU utilisation of the workload's GPUs through
	// NVML instead, as a proxy for throughput. Without a driver this fails
	// with ErrNoGPUSignal rather than falling back silently.
	UseNVML bool
	// PointDuration is how long the workload runs at each CPU count; 0
	// means DefaultPointDuration. A workload may also end a point early by
	// exiting 0 after printing its throughput.
	PointDuration time.Duration
	// MaxCPUs is the largest CPU count swept; 0 means every CPU this
	// process may run on.
	MaxCPUs int
	// Tolerance is the fraction of the best throughput that the sweep and
	// the best case may give up; 0 means DefaultTolerance.
	Tolerance float64
	// DatasetPath is the workload's dataset, a file or a directory, for the
	// memory model; "" means the workload has none worth caching and is
	// modelled as insensitive to memory.
	DatasetPath string
	// GPUs is the number of GPUs the workload uses; 0 means a CPU-only
	// workload, profiled as if it held one GPU (its per-GPU axes are then
	// per workload).
	GPUs int
	// NodeGPUs is the number of GPUs of this node, which defines the
	// GPU-proportional share that Record.Matrix is normalised to; 0 means
	// max(GPUs, 1), as if the workload had the node to itself.
	NodeGPUs int
	// Credential runs the workload as this user; nil runs it as the
	// profiler's own user.
	Credential *syscall.Credential
	// Job confines the workload inside a Slurm job (job.go): its CPUs
	// and cgroups. nil confines it as this process may (the profiler run
	// on its own, not by the agent).
	Job *Job
}

// Progress is reported after every step of a profiling run.
type Progress struct {
	// Point is the number of sweep points measured so far; Points the
	// sweep's current estimate of how many it will measure in all (it can
	// change as the sweep learns where the knee is).
	Point, Points int
	// CPUs and Throughput are set in exactly one report per measured
	// point, the one that announces it; every other report (start of a
	// point, a message, the end) has CPUs 0. A point re-measured because
	// of contention is announced once, with the attempt kept.
	CPUs       int
	Throughput float64
	// Elapsed since the run started and the estimated time left.
	Elapsed, ETA time.Duration
	// Message says what happens now, for a person watching.
	Message string
}

// normalised is a SweepSpec with defaults filled in and checked.
type normalised struct {
	SweepSpec
	regex *regexp.Regexp
	gpus  int // max(GPUs, 1)
}

func (s SweepSpec) normalise() (normalised, error) {
	n := normalised{SweepSpec: s}
	n.Argv = slices.Clone(s.Argv) // Profile resolves Argv[0]; the caller's stays
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return n, fmt.Errorf("%w: no workload command", ErrBadSpec)
	}
	if s.PointDuration == 0 {
		n.PointDuration = DefaultPointDuration
	}
	if n.PointDuration < 0 {
		return n, fmt.Errorf("%w: point duration %v", ErrBadSpec, s.PointDuration)
	}
	if s.Tolerance == 0 {
		n.Tolerance = DefaultTolerance
	}
	if !(n.Tolerance > 0 && n.Tolerance < 1) {
		return n, fmt.Errorf("%w: tolerance %v is not in (0, 1)", ErrBadSpec, s.Tolerance)
	}
	if s.GPUs < 0 || s.NodeGPUs < 0 || s.MaxCPUs < 0 {
		return n, fmt.Errorf("%w: negative GPU or CPU count", ErrBadSpec)
	}
	n.gpus = max(s.GPUs, 1)
	if n.NodeGPUs == 0 {
		n.NodeGPUs = n.gpus
	}
	if n.NodeGPUs < n.gpus {
		return n, fmt.Errorf("%w: the workload uses %d GPUs of a node of %d", ErrBadSpec, n.gpus, n.NodeGPUs)
	}
	if !s.UseNVML {
		expr := s.Regex
		if expr == "" {
			expr = DefaultRegex
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return n, fmt.Errorf("%w: regex: %w", ErrBadSpec, err)
		}
		if re.NumSubexp() < 1 {
			return n, fmt.Errorf("%w: regex %q has no capture group for the number", ErrBadSpec, expr)
		}
		n.regex = re
	}
	return n, nil
}

// finite reports whether v is a usable number.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
