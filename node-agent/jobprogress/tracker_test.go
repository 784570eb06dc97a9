package jobprogress_test

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/jobprogress"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// report is one report of a table: at t0+sec, count iters.
type report struct {
	sec   float64
	iters uint64
	err   error // wanted from Report
}

func at(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }

// alpha is the weight a rate of an interval of sec seconds gets with the
// agent's time constant (wire.ProgressTau).
func alpha(sec float64) float64 { return 1 - math.Exp(-sec/wire.ProgressTau.Seconds()) }

func TestTrackerRate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reports []report
		want    float64 // the rate after the last report; NaN: none
	}{
		{"one report has no rate", []report{{0, 100, nil}}, math.NaN()},
		{"the first interval seeds the rate", []report{{0, 100, nil}, {5, 150, nil}}, 10},
		{"then moves towards each interval's rate by 1-exp(-dt/tau)",
			[]report{{0, 0, nil}, {5, 50, nil}, {10, 150, nil}}, 10 + alpha(5)*(20-10)},
		{"a long interval weighs more than a short one",
			[]report{{0, 0, nil}, {5, 50, nil}, {65, 1250, nil}}, 10 + alpha(60)*(20-10)},
		{"a steady loop reads its rate whatever the report interval",
			[]report{{0, 0, nil}, {1, 7, nil}, {8, 56, nil}, {10, 70, nil}, {30, 210, nil}}, 7},
		{"a report within MinInterval is dropped and changes nothing",
			[]report{{0, 0, nil}, {5, 50, nil}, {5.5, 1000, jobprogress.ErrTooSoon}, {10, 100, nil}}, 10},
		{"a flood: only one report a second is taken",
			[]report{{0, 0, nil}, {0.1, 1, jobprogress.ErrTooSoon}, {0.2, 2, jobprogress.ErrTooSoon}, {0.99, 3, jobprogress.ErrTooSoon}, {1, 10, nil}}, 10},
		{"a decrease is a restart: no rate until the next report",
			[]report{{0, 0, nil}, {5, 50, nil}, {10, 3, nil}}, math.NaN()},
		{"after a restart the new run's first interval seeds the rate anew",
			[]report{{0, 0, nil}, {5, 500, nil}, {10, 3, nil}, {15, 13, nil}}, 2},
		{"an equal count is progress of 0, not a restart",
			[]report{{0, 0, nil}, {5, 50, nil}, {10, 50, nil}}, 10 - alpha(5)*10},
		{"a jump faster than MaxItersPerSec starts a new run",
			[]report{{0, 0, nil}, {5, 50, nil}, {6, 50 + 2e6, nil}}, math.NaN()},
		{"the largest count is a count like any other",
			[]report{{0, math.MaxUint64 - 100, nil}, {10, math.MaxUint64, nil}}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := jobprogress.New(jobprogress.Config{})
			for _, r := range tc.reports {
				_, err := tr.Report(7, r.iters, at(r.sec))
				if !errors.Is(err, r.err) || (r.err == nil) != (err == nil) {
					t.Fatalf("report %v: err %v, want %v", r, err, r.err)
				}
			}
			last := tc.reports[len(tc.reports)-1]
			p, ok := tr.Progress(at(last.sec))[7]
			if math.IsNaN(tc.want) {
				if ok {
					t.Fatalf("rate %v, want none", p.ItersPerSec)
				}
				return
			}
			if !ok || math.Abs(p.ItersPerSec-tc.want) > 1e-9 {
				t.Fatalf("rate %v (listed %v), want %v", p.ItersPerSec, ok, tc.want)
			}
			if p.ItersPerSec > wire.MaxItersPerSec || p.ItersPerSec < 0 {
				t.Fatalf("rate %v outside what a usage report carries", p.ItersPerSec)
			}
		})
	}
}

func TestTrackerProgressNamesLastReport(t *testing.T) {
	tr := jobprogress.New(jobprogress.Config{})
	tr.Report(3, 10, at(0))
	tr.Report(3, 20, at(2))
	tr.Report(3, 30, at(2.5)) // too soon: not the last report
	got := tr.Progress(at(10))[3]
	if got.Iterations != 20 || !got.At.Equal(at(2)) || got.ItersPerSec != 5 {
		t.Fatalf("progress %+v, want 20 iterations at +2 s, 5/s", got)
	}
}

func TestTrackerForgetsStaleAndEndedJobs(t *testing.T) {
	tr := jobprogress.New(jobprogress.Config{Stale: time.Minute})
	for _, job := range []uint32{1, 2, 3} {
		tr.Report(job, 0, at(0))
	}
	tr.Report(1, 10, at(10))
	tr.Report(2, 10, at(50))
	tr.Report(3, 10, at(50))
	tr.Forget(3)
	got := tr.Progress(at(70))
	if _, ok := got[1]; !ok {
		t.Fatalf("job 1, last report 60 s ago, dropped with a 60 s stale timeout: %v", got)
	}
	if _, ok := got[3]; ok {
		t.Fatal("job 3 ended (Forget) and is still listed")
	}
	got = tr.Progress(at(71))
	if _, ok := got[1]; ok {
		t.Fatalf("job 1, silent 61 s, still listed: %v", got)
	}
	if _, ok := got[2]; !ok || tr.Jobs() != 1 {
		t.Fatalf("job 2 (21 s old) missing, or stale jobs kept: %v, %d tracked", got, tr.Jobs())
	}
	// A forgotten job that reports again starts a new run.
	tr.Report(3, 100, at(76))
	if _, ok := tr.Progress(at(76))[3]; ok {
		t.Fatal("a forgotten job kept its old run")
	}
}

// MaxJobs bounds the jobs tracked: a new job beyond it is refused while
// none is stale, and takes a stale one's place once one is.
func TestTrackerBoundsJobs(t *testing.T) {
	tr := jobprogress.New(jobprogress.Config{MaxJobs: 3, Stale: time.Minute})
	for job := uint32(1); job <= 3; job++ {
		if _, err := tr.Report(job, 0, at(float64(job))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Report(4, 0, at(30)); !errors.Is(err, jobprogress.ErrTooManyJobs) {
		t.Fatalf("a fourth job of three allowed: %v", err)
	}
	// Tracked jobs keep reporting.
	if _, err := tr.Report(2, 10, at(30)); err != nil {
		t.Fatal(err)
	}
	// Job 1 (last report at +1 s) and 3 (+3 s) are stale at +63.5 s.
	if _, err := tr.Report(4, 0, at(63.5)); err != nil {
		t.Fatalf("a new job refused while stale ones held the places: %v", err)
	}
	if n := tr.Jobs(); n != 2 {
		t.Fatalf("%d jobs tracked, want 2 (jobs 2 and 4)", n)
	}
}

// Many jobs at once: each keeps its own rate, and memory stays bounded
// under a flood of reports from more jobs than MaxJobs.
func TestTrackerManyJobs(t *testing.T) {
	const jobs = 1000
	tr := jobprogress.New(jobprogress.Config{})
	for round := 0; round < 3; round++ {
		for j := uint32(1); j <= jobs; j++ {
			if _, err := tr.Report(j, uint64(round)*uint64(j)*5, at(float64(round)*5)); err != nil {
				t.Fatalf("job %d round %d: %v", j, round, err)
			}
		}
	}
	got := tr.Progress(at(10))
	if len(got) != jobs {
		t.Fatalf("%d jobs with a rate, want %d", len(got), jobs)
	}
	for j, p := range got {
		if math.Abs(p.ItersPerSec-float64(j)) > 1e-9 {
			t.Fatalf("job %d: rate %v, want %v", j, p.ItersPerSec, j)
		}
	}

	flood := jobprogress.New(jobprogress.Config{})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 200_000; i++ {
		flood.Report(uint32(i%5000)+1, uint64(i), at(float64(i)/1000))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n := flood.Jobs(); n != jobprogress.DefaultMaxJobs {
		t.Fatalf("%d jobs tracked after a flood from 5000, want the bound %d", n, jobprogress.DefaultMaxJobs)
	}
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 1<<20 {
		t.Fatalf("the heap grew by %d bytes for %d tracked jobs", grown, flood.Jobs())
	}
}

// The collector exports one rate per job with a rate, labelled with the
// job id, and drops a job's series once it is forgotten.
func TestCollectorDropsForgottenJobs(t *testing.T) {
	tr := jobprogress.New(jobprogress.Config{})
	now := time.Now()
	tr.Report(41, 0, now.Add(-10*time.Second))
	tr.Report(41, 50, now.Add(-5*time.Second))
	tr.Report(42, 0, now.Add(-10*time.Second))
	tr.Report(42, 20, now.Add(-5*time.Second))
	tr.Report(42, 21, now.Add(-4900*time.Millisecond)) // too soon
	want := `
# HELP lachesis_agent_job_iterations_per_second Iterations per second a job's training loop reported on this node (opt-in, etc/lachesis_progress.py), smoothed over about 30 s.
# TYPE lachesis_agent_job_iterations_per_second gauge
lachesis_agent_job_iterations_per_second{hpc_job="41"} 10
lachesis_agent_job_iterations_per_second{hpc_job="42"} 4
`
	if err := testutil.CollectAndCompare(tr.Collector(), strings.NewReader(want), jobprogress.MetricJobItersPerSec); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(tr.Collector(), jobprogress.MetricProgressReports); n != 5 {
		t.Fatalf("%d outcome series, want 5", n)
	}
	tr.Forget(41)
	want = `
# HELP lachesis_agent_job_iterations_per_second Iterations per second a job's training loop reported on this node (opt-in, etc/lachesis_progress.py), smoothed over about 30 s.
# TYPE lachesis_agent_job_iterations_per_second gauge
lachesis_agent_job_iterations_per_second{hpc_job="42"} 4
`
	if err := testutil.CollectAndCompare(tr.Collector(), strings.NewReader(want), jobprogress.MetricJobItersPerSec); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTrackerReport is the tracker's cost of one accepted report
// with 1,000 jobs tracked (the agent's lock is held for this long).
func BenchmarkTrackerReport(b *testing.B) {
	tr := jobprogress.New(jobprogress.Config{MinInterval: time.Nanosecond})
	for j := uint32(1); j <= 1000; j++ {
		tr.Report(j, 0, t0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tr.Report(uint32(i%1000)+1, uint64(i), t0.Add(time.Duration(i+1)*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrackerProgress is one usage report's (or scrape's) read of
// 1,000 jobs' rates.
func BenchmarkTrackerProgress(b *testing.B) {
	tr := jobprogress.New(jobprogress.Config{})
	for j := uint32(1); j <= 1000; j++ {
		tr.Report(j, 0, t0)
		tr.Report(j, 100, t0.Add(5*time.Second))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(tr.Progress(t0.Add(6*time.Second))) != 1000 {
			b.Fatal("jobs lost")
		}
	}
}
