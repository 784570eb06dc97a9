package trace

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// ErrBadTrace is wrapped by every error about a trace's content or format.
var ErrBadTrace = errors.New("bad trace")

// Job is one job of a trace, whatever format it came from.
type Job struct {
	// ID is unique within a trace; the policy uses it as the last
	// tie-break, as Slurm's job id.
	ID uint32
	// Submit is the submission time in seconds since the trace's start.
	Submit float64
	GPUs   int
	// Duration is the job's run time in seconds at the GPU-proportional
	// share of CPUs and memory, without queueing or preemption.
	Duration float64
	// Model is the model the job trains, "" when the trace does not say.
	Model string
	// Cluster is the virtual cluster (tenant group), where a trace has one.
	Cluster string
	// Share is the part of one GPU a job of a fraction asks for, in (0, 1)
	// (GPUs is then 1); 0 for a job of whole GPUs. Only a run with sharing
	// on gives a job less than a whole GPU.
	Share float64
	// Class is the job's sharing class: guaranteed (the default) or
	// opportunistic (sim's sharing runs; ignored with sharing off).
	Class sharing.Class
}

// Trace is a list of jobs sorted by submit time, then ID.
type Trace struct {
	Name string
	// Start is the wall-clock time of Submit = 0; zero when the format has
	// only relative times.
	Start time.Time
	Jobs  []Job
}

// normalise sorts the jobs, shifts times so the first submission is at 0
// (keeping Start in step) and checks what every simulation relies on.
func (t *Trace) Normalise() error {
	if len(t.Jobs) == 0 {
		return fmt.Errorf("%w: %s has no jobs", ErrBadTrace, t.Name)
	}
	slices.SortStableFunc(t.Jobs, func(a, b Job) int {
		if a.Submit != b.Submit {
			if a.Submit < b.Submit {
				return -1
			}
			return 1
		}
		return int(int64(a.ID) - int64(b.ID))
	})
	first := t.Jobs[0].Submit
	if first != 0 {
		for i := range t.Jobs {
			t.Jobs[i].Submit -= first
		}
		if !t.Start.IsZero() {
			t.Start = t.Start.Add(time.Duration(first * float64(time.Second)))
		}
	}
	seen := make(map[uint32]struct{}, len(t.Jobs))
	for _, j := range t.Jobs {
		if _, dup := seen[j.ID]; dup {
			return fmt.Errorf("%w: %s: job id %d appears twice", ErrBadTrace, t.Name, j.ID)
		}
		seen[j.ID] = struct{}{}
		if j.GPUs <= 0 {
			return fmt.Errorf("%w: %s: job %d asks for %d GPUs", ErrBadTrace, t.Name, j.ID, j.GPUs)
		}
		if j.Share != 0 && (!(j.Share > 0 && j.Share < 1) || j.GPUs != 1) {
			return fmt.Errorf("%w: %s: job %d asks for a share %v of %d GPUs; a share is of one GPU, in (0, 1)", ErrBadTrace, t.Name, j.ID, j.Share, j.GPUs)
		}
		if !(j.Duration > 0) || math.IsInf(j.Duration, 0) {
			return fmt.Errorf("%w: %s: job %d has duration %v, want > 0", ErrBadTrace, t.Name, j.ID, j.Duration)
		}
		if math.IsNaN(j.Submit) || math.IsInf(j.Submit, 0) {
			return fmt.Errorf("%w: %s: job %d has submit time %v", ErrBadTrace, t.Name, j.ID, j.Submit)
		}
	}
	return nil
}

// Filter selects part of a trace. Zero fields select everything.
type Filter struct {
	// From and To bound the submit time (From inclusive, To exclusive).
	// They need a trace with a wall-clock Start; otherwise use
	// FromSec/ToSec, seconds since the trace's start.
	From, To       time.Time
	FromSec, ToSec float64
	// Clusters keeps only jobs of these virtual clusters.
	Clusters []string
	// Skip drops the first Skip selected jobs (by submit order), then Limit
	// keeps at most Limit of the rest.
	Skip, Limit int
	// DurationScale multiplies every duration (the 60-job cross-check runs
	// the workload with durations ×20); 0 means 1.
	DurationScale float64
}

// Select returns a new trace with the jobs the filter keeps, times shifted
// so the first kept job is submitted at 0.
func (t *Trace) Select(f Filter) (*Trace, error) {
	if (!f.From.IsZero() || !f.To.IsZero()) && t.Start.IsZero() {
		return nil, fmt.Errorf("%w: %s has no wall-clock times; select a window in seconds instead", ErrBadTrace, t.Name)
	}
	lo, hi := f.FromSec, f.ToSec
	if !f.From.IsZero() {
		lo = f.From.Sub(t.Start).Seconds()
	}
	if !f.To.IsZero() {
		hi = f.To.Sub(t.Start).Seconds()
	}
	scale := f.DurationScale
	if scale == 0 {
		scale = 1
	}
	out := &Trace{Name: t.Name, Start: t.Start}
	skipped := 0
	for _, j := range t.Jobs {
		if (lo != 0 || !f.From.IsZero()) && j.Submit < lo {
			continue
		}
		if (hi != 0 || !f.To.IsZero()) && j.Submit >= hi {
			continue
		}
		if len(f.Clusters) > 0 && !slices.Contains(f.Clusters, j.Cluster) {
			continue
		}
		if skipped < f.Skip {
			skipped++
			continue
		}
		if f.Limit > 0 && len(out.Jobs) >= f.Limit {
			break
		}
		j.Duration *= scale
		out.Jobs = append(out.Jobs, j)
	}
	if err := out.Normalise(); err != nil {
		return nil, err
	}
	return out, nil
}

// GPUSeconds is the trace's total work, Σ GPUs × duration.
func (t *Trace) GPUSeconds() float64 {
	var s float64
	for _, j := range t.Jobs {
		s += float64(j.GPUs) * j.Duration
	}
	return s
}

// Span is the time from the first to the last submission.
func (t *Trace) Span() float64 {
	if len(t.Jobs) == 0 {
		return 0
	}
	return t.Jobs[len(t.Jobs)-1].Submit - t.Jobs[0].Submit
}
