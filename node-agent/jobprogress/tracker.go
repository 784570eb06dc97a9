package jobprogress

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Defaults of a Tracker. Why these:
//   - MinInterval 1 s: etc/lachesis_progress.py reports at most every 5 s;
//     one report a second per job is plenty for a rate averaged over
//     half a minute, and bounds what a job flooding the socket costs.
//   - the rate's time constant is wire.ProgressTau (30 s), not a
//     setting: it is part of what the agent promises of a rate, and the
//     controller's introspection waits on it after a change of sharers.
//   - Stale 2 min: a loop that stopped reporting (hung, evaluating,
//     checkpointing for long, or gone without a job-end report) must not
//     keep its last rate forever.
//   - MaxJobs 1024: more jobs than a node has CPUs is implausible; a
//     report needs a running job of the caller on the node, so Slurm bounds
//     this first, and the cap is the defence behind it.
const (
	DefaultMinInterval = time.Second
	DefaultStale       = 2 * time.Minute
	DefaultMaxJobs     = 1024
)

// Errors of Report.
var (
	// ErrTooSoon: the job's last accepted report is younger than
	// MinInterval; this one is dropped.
	ErrTooSoon = errors.New("progress reported too often")
	// ErrTooManyJobs: MaxJobs jobs are tracked, none stale.
	ErrTooManyJobs = errors.New("too many jobs reporting progress")
)

// Config tunes a Tracker; zero fields take the defaults.
type Config struct {
	MinInterval time.Duration
	Stale       time.Duration
	MaxJobs     int
}

// Tracker keeps each reporting job's last count and smoothed rate.
//
// The rate: between two accepted reports (n0 at t0, n1 at t1) the job ran
// at r = (n1-n0)/(t1-t0); the job's rate moves towards r by
// a = 1 - exp(-(t1-t0)/wire.ProgressTau). Weighting by elapsed time
// rather than by report makes the average independent of how often the
// loop reports (one 10 s interval counts as much as two of 5 s), and
// needs two numbers per job, not a window of reports. The first interval
// of a run seeds the rate. A count below the previous one is a restart (a new process, a job
// requeued): the run starts anew and has no rate until its next report. A
// count that rose faster than wire.MaxItersPerSec is no training loop
// (a counter of samples, or a resume from a checkpoint): it starts a new
// run too, so no rate ever exceeds what a usage report may carry.
type Tracker struct {
	cfg Config

	mu   sync.Mutex
	jobs map[uint32]*jobState
	// pruned is when a full tracker last looked for stale jobs: a
	// report of a new job to a full tracker scans at most once per
	// MinInterval.
	pruned time.Time

	accepted, restarts, tooSoon, tooMany, refused atomic.Uint64
}

// jobState is one job's run.
type jobState struct {
	iters   uint64
	at      time.Time // the last accepted report
	rate    float64
	hasRate bool
}

// Compile-time check: the agent's progress source (node-agent/agent's
// Deps) takes a Tracker.
var _ interface {
	Progress(time.Time) map[uint32]wire.JobProgress
} = (*Tracker)(nil)

// New returns an empty Tracker.
func New(cfg Config) *Tracker {
	if cfg.MinInterval <= 0 {
		cfg.MinInterval = DefaultMinInterval
	}
	if cfg.Stale <= 0 {
		cfg.Stale = DefaultStale
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	return &Tracker{cfg: cfg, jobs: map[uint32]*jobState{}}
}

// Report records that job's loop has done iters iterations at now, and
// returns the job's progress after it (ItersPerSec 0 while the run has no
// rate yet). The caller has established that the reporting process runs in
// job and belongs to its owner.
func (t *Tracker) Report(job uint32, iters uint64, now time.Time) (wire.JobProgress, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.jobs[job]
	if !ok {
		if len(t.jobs) >= t.cfg.MaxJobs && now.Sub(t.pruned) >= t.cfg.MinInterval {
			t.pruneLocked(now)
			t.pruned = now
		}
		if len(t.jobs) >= t.cfg.MaxJobs {
			t.tooMany.Add(1)
			return wire.JobProgress{}, fmt.Errorf("%w: %d jobs tracked on this node", ErrTooManyJobs, len(t.jobs))
		}
		s = &jobState{iters: iters, at: now}
		t.jobs[job] = s
		t.accepted.Add(1)
		return s.progress(), nil
	}
	dt := now.Sub(s.at)
	if dt < t.cfg.MinInterval {
		t.tooSoon.Add(1)
		return wire.JobProgress{}, fmt.Errorf("%w: job %d reported %v ago, at most one report per %v is taken", ErrTooSoon, job, dt.Round(time.Millisecond), t.cfg.MinInterval)
	}
	t.accepted.Add(1)
	sec := dt.Seconds()
	if iters < s.iters || float64(iters-s.iters)/sec > wire.MaxItersPerSec {
		t.restarts.Add(1)
		*s = jobState{iters: iters, at: now}
		return s.progress(), nil
	}
	r := float64(iters-s.iters) / sec
	if s.hasRate {
		s.rate += (1 - math.Exp(-sec/wire.ProgressTau.Seconds())) * (r - s.rate)
	} else {
		s.rate, s.hasRate = r, true
	}
	s.iters, s.at = iters, now
	return s.progress(), nil
}

func (s *jobState) progress() wire.JobProgress {
	return wire.JobProgress{Iterations: s.iters, ItersPerSec: s.rate, At: s.at}
}

// Refused counts a report the agent turned away before it reached the
// tracker (not from a job of the caller's), for the reports metric.
func (t *Tracker) Refused() { t.refused.Add(1) }

// Forget drops job (it ended on this node); its metric series goes with it.
func (t *Tracker) Forget(job uint32) {
	t.mu.Lock()
	delete(t.jobs, job)
	t.mu.Unlock()
}

// Progress returns the rate of every job whose run has one and that
// reported within Stale of now, and forgets the stale ones. At is the
// job's last report: a consumer can tell how fresh the rate is.
func (t *Tracker) Progress(now time.Time) map[uint32]wire.JobProgress {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked(now)
	out := make(map[uint32]wire.JobProgress, len(t.jobs))
	for id, s := range t.jobs {
		if s.hasRate {
			out[id] = s.progress()
		}
	}
	return out
}

// Jobs is how many jobs are tracked (stale ones included until pruned).
func (t *Tracker) Jobs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.jobs)
}

func (t *Tracker) pruneLocked(now time.Time) {
	for id, s := range t.jobs {
		if now.Sub(s.at) > t.cfg.Stale {
			delete(t.jobs, id)
		}
	}
}
