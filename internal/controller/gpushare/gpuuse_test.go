package gpushare

import (
	"bytes"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

func runningAs(id, uid uint32) Job {
	s := running(id, 2, 1000, 1000)
	s.User = uid
	return s
}

// usageReport is node n's report at t of one job's GPUs, one utilisation
// and memory (MB) per GPU.
func usageReport(node string, t int64, job, uid uint32, util []float64, memMB float64, progress *wire.JobProgress) *wire.JobUsageReport {
	e := wire.JobUsage{JobID: job, UID: uid, Progress: progress}
	for i, u := range util {
		e.GPUs = append(e.GPUs, wire.JobGPUUsage{Index: i, UtilPct: u, MemUsedMB: memMB, Sharers: 1})
	}
	return &wire.JobUsageReport{Node: node, At: time.Unix(t, 0), IntervalSec: 10, Jobs: []wire.JobUsage{e}}
}

func TestUsageSummaryOfARunningJobShowsInItsAdminComment(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1010, runningAs(1, owner))
	c.ReportGPUUse(usageReport("n1", 1020, 1, owner, []float64{20, 40}, 4096, nil))
	c.ReportGPUUse(usageReport("n1", 1030, 1, owner, []float64{80, 80}, 9318, &wire.JobProgress{Iterations: 100, ItersPerSec: 12.5}))
	d := pass(c, 1040, runningAs(1, owner))
	want := "[GPU use: mean 55%, peak 80%, memory peak 9.1 GiB, 12.5 it/s, 2 samples]"
	if d[0].GPUUse != want {
		t.Fatalf("usage segment %q, want %q", d[0].GPUUse, want)
	}
	// Unchanged since: nothing for the plugin to rewrite.
	if d := pass(c, 1050, runningAs(1, owner)); d[0].GPUUse != "" {
		t.Fatalf("unchanged summary sent again: %q", d[0].GPUUse)
	}
	// Changed, but shown less than a minute ago: it waits for the minute.
	c.ReportGPUUse(usageReport("n1", 1060, 1, owner, []float64{10, 10}, 100, nil))
	if d := pass(c, 1070, runningAs(1, owner)); d[0].GPUUse != "" {
		t.Fatalf("segment rewritten within a minute: %q", d[0].GPUUse)
	}
	if d := pass(c, 1100, runningAs(1, owner)); !strings.Contains(d[0].GPUUse, "3 samples]") {
		t.Fatalf("segment after a minute %q, want 3 samples", d[0].GPUUse)
	}
	u, ok := c.JobGPUUse(1)
	if !ok || u.Samples != 3 || u.UtilPeak != 80 || u.MemPeakMB != 9318 || u.FirstSeen != 1020 || u.LastSeen != 1060 ||
		u.ItersPerSecLast != 12.5 || u.ProgressSamples != 1 || u.GPUsMax != 2 {
		t.Fatalf("summary %+v", u)
	}
}

func TestUsageEntriesThatNameNoRunningJobOfTheirUIDAreDropped(t *testing.T) {
	tests := []struct {
		name string
		rep  *wire.JobUsageReport
	}{
		{"another user's job with that user's uid wrong", usageReport("n1", 1020, 1, mallory, []float64{99}, 1, nil)},
		{"a job Slurm does not run", usageReport("n1", 1020, 7, owner, []float64{99}, 1, nil)},
		{"a pending job", usageReport("n1", 1020, 2, owner, []float64{99}, 1, nil)},
		{"an entry without GPUs", usageReport("n1", 1020, 1, owner, nil, 0, nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			c.log = slog.New(slog.NewTextHandler(&logs, nil))
			defer c.Close()
			p := pending(2, 1, 1000)
			p.User = owner
			pass(c, 1010, runningAs(1, owner), p)
			c.ReportGPUUse(tc.rep)
			c.ReportGPUUse(tc.rep) // the second is counted, not logged again
			d := pass(c, 1030, runningAs(1, owner), p)
			if d[0].GPUUse != "" || d[1].GPUUse != "" {
				t.Fatalf("a dropped entry changed a comment: %q %q", d[0].GPUUse, d[1].GPUUse)
			}
			for _, id := range []uint32{1, 2, 7} {
				if u, ok := c.JobGPUUse(id); ok {
					t.Fatalf("job %d has a summary from a dropped entry: %+v", id, u)
				}
			}
			if n := strings.Count(logs.String(), "dropped job-usage entries"); n != 1 {
				t.Fatalf("%d log lines for two dropped entries within a minute, want 1:\n%s", n, logs.String())
			}
		})
	}
}

func TestARetriedUsageReportCountsOnce(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1010, runningAs(1, owner))
	rep := usageReport("n1", 1020, 1, owner, []float64{50}, 1, nil)
	c.ReportGPUUse(rep)
	c.ReportGPUUse(rep)                                                      // its ack was lost
	c.ReportGPUUse(usageReport("n2", 1020, 1, owner, []float64{10}, 1, nil)) // another node of the job
	if u, _ := c.JobGPUUse(1); u.Samples != 2 || u.MeanUtil() != 30 {
		t.Fatalf("summary %+v, want 2 samples of mean 30", u)
	}
}

func TestIdleJobIsLoggedOnceAndCounted(t *testing.T) {
	var logs bytes.Buffer
	db := filepath.Join(t.TempDir(), "l.db")
	cfg := testConfig(db)
	cfg.GPUUse.IdleBelowPct, cfg.GPUUse.IdleAfter = 10, 60*time.Second
	c := openCoreWith(t, cfg)
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	defer c.Close()
	busy, idle := runningAs(1, owner), runningAs(2, owner)
	pass(c, 1000, busy, idle)
	for t0 := int64(1010); t0 <= 1090; t0 += 10 {
		c.ReportGPUUse(usageReport("n1", t0, 1, owner, []float64{50, 3}, 1, nil)) // mean 26.5: busy
		util := 2.0
		if t0 == 1020 {
			util = 40 // busy once: the idle time starts after it
		}
		c.ReportGPUUse(usageReport("n2", t0, 2, owner, []float64{util}, 1, nil))
	}
	pass(c, 1085, busy, idle) // idle since 1030: 55 s
	if strings.Contains(logs.String(), "idle") {
		t.Fatalf("idle logged before idle_after:\n%s", logs.String())
	}
	pass(c, 1090, busy, idle)
	pass(c, 1100, busy, idle)
	if n := strings.Count(logs.String(), "job holds its GPUs idle"); n != 1 || !strings.Contains(logs.String(), "job_id=2") {
		t.Fatalf("want one idle line, for job 2:\n%s", logs.String())
	}
	u, _ := c.JobGPUUse(2)
	if !u.Idle(1090, 60) || u.IdleSince != 1030 || u.IdlePeak != 2 {
		t.Fatalf("job 2 summary %+v", u)
	}
	if u, _ := c.JobGPUUse(1); u.Idle(1100, 60) {
		t.Fatalf("busy job idle: %+v", u)
	}
}

func TestUsageIsSavedClosedWhenTheJobEndsAndContinuedAfterARestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	pass(c, 1010, runningAs(1, owner), runningAs(2, owner))
	c.ReportGPUUse(usageReport("n1", 1020, 1, owner, []float64{60}, 100, nil))
	c.ReportGPUUse(usageReport("n1", 1020, 2, owner, []float64{30}, 100, nil))
	fin := runningAs(1, owner)
	fin.State = Finished
	pass(c, 1030, fin, runningAs(2, owner))
	store := closedLedger(t, c, db)
	u1, ok1, err1 := store.JobGPUUseOf(1)
	u2, ok2, err2 := store.JobGPUUseOf(2)
	if err1 != nil || err2 != nil || !ok1 || !ok2 {
		t.Fatalf("rows: %v %v %v %v", ok1, err1, ok2, err2)
	}
	if u1.Finished != 1030 || u1.Samples != 1 || u2.Finished != 0 {
		t.Fatalf("finished job %+v, running job %+v", u1, u2)
	}
	store.Close()

	c = openCore(t, db) // slurmctld restarted; job 2 still runs
	defer c.Close()
	pass(c, 1040, runningAs(2, owner))
	c.ReportGPUUse(usageReport("n1", 1050, 2, owner, []float64{50}, 100, nil))
	if u, _ := c.JobGPUUse(2); u.Samples != 2 || u.MeanUtil() != 40 {
		t.Fatalf("after restart %+v, want the stored sample continued", u)
	}
}

func TestUsageFoldMath(t *testing.T) {
	var u ledger.JobGPUUse
	for i, s := range []ledger.JobGPUSample{
		{At: 10, UtilPct: 5, MemPeakMB: 100, GPUs: 2, Sharers: 1},
		{At: 20, UtilPct: 15, MemPeakMB: 300, GPUs: 2, Sharers: 3, HasProgress: true, Iterations: 10, ItersPerSec: 2},
		{At: 30, UtilPct: 4, MemPeakMB: 200, GPUs: 1, Sharers: 2, HasProgress: true, Iterations: 40, ItersPerSec: 4},
		{At: 40, UtilPct: 8, MemPeakMB: 200, GPUs: 2, Sharers: 1},
	} {
		u.Fold(s, 10)
		if i == 0 && u.IdleSince != 10 {
			t.Fatalf("below the threshold from the first sample: idle since %d", u.IdleSince)
		}
		if i == 1 && u.IdleSince != 0 {
			t.Fatalf("a sample at or above the threshold ends idleness: idle since %d", u.IdleSince)
		}
	}
	if u.Samples != 4 || u.MeanUtil() != 8 || u.UtilPeak != 15 || u.MemPeakMB != 300 || u.GPUsMax != 2 || u.SharersMax != 3 ||
		u.MeanItersPerSec() != 3 || u.ItersPerSecLast != 4 || u.IterationsLast != 40 || u.FirstSeen != 10 || u.LastSeen != 40 ||
		u.IdleSince != 30 || u.IdlePeak != 8 || u.IdleFor(100) != 70 || !u.Idle(90, 60) || u.Idle(89, 60) {
		t.Fatalf("summary %+v", u)
	}
	u.Fold(ledger.JobGPUSample{At: 50, UtilPct: 8}, 5) // a new threshold restarts the idle time
	if u.IdleSince != 0 || u.IdleBelowPct != 5 {
		t.Fatalf("after a new threshold %+v", u)
	}
	seg := gpuUseSegment(&u)
	if len(seg) > GPUUseMax || !strings.HasPrefix(seg, GPUUsePrefix) || strings.Count(seg, "]") != 1 || !strings.HasSuffix(seg, "]") ||
		!strings.Contains(seg, "shared by up to 3 jobs") {
		t.Fatalf("segment %q", seg)
	}
	big := ledger.JobGPUUse{Samples: 1 << 62, UtilSum: 100 * (1 << 62), UtilPeak: 100, MemPeakMB: 1e300, ProgressSamples: 1,
		ItersPerSecLast: wire.MaxItersPerSec, SharersMax: wire.MaxUsageJobs}
	if seg := gpuUseSegment(&big); len(seg) > GPUUseMax || !strings.HasSuffix(seg, "]") {
		t.Fatalf("segment of the largest numbers: %d bytes %q", len(seg), seg)
	}
}

// BenchmarkReportUsage measures one node's report folded into the core
// (the listener's goroutine; it takes only sharing's mutex): a node of 8
// jobs, and the most a report may carry (wire.MaxUsageJobs, one GPU each),
// with 25000 jobs running.
func BenchmarkReportUsage(b *testing.B) {
	for _, perReport := range []int{8, wire.MaxUsageJobs} {
		b.Run(fmt.Sprintf("jobs_per_report=%d", perReport), func(b *testing.B) {
			c := openCoreB(b)
			defer c.Close()
			const running = 25000
			snaps := make([]Job, running)
			for i := range snaps {
				snaps[i] = runningAs(uint32(i+1), owner)
			}
			pass(c, 1000, snaps...)
			rep := &wire.JobUsageReport{Node: "n1", IntervalSec: 10}
			for i := range perReport {
				rep.Jobs = append(rep.Jobs, wire.JobUsage{JobID: uint32(i + 1), UID: owner,
					GPUs: []wire.JobGPUUsage{{UtilPct: 40, MemUsedMB: 1000, Sharers: 1}}})
			}
			at := time.Unix(1000, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				at = at.Add(time.Second)
				rep.At = at
				c.ReportGPUUse(rep)
			}
		})
	}
}

func openCoreB(b *testing.B) *testCore {
	return openCore(b, filepath.Join(b.TempDir(), "l.db"))
}

// BenchmarkObserveUsage measures what per-job GPU use adds to a pass (the
// pass's other stages are the core's BenchmarkPass's): n jobs, a quarter running, each
// running one with a summary that changed since the last pass (agents
// report more often than passes run), passes 30 s apart: a job's segment
// is made at most once a minute (gpuUseShowEvery), so every other pass.
func BenchmarkObserveUsage(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			c := openCoreB(b)
			defer c.Close()
			snaps := make([]Job, n)
			for i := range snaps {
				snaps[i] = pending(uint32(i+1), 1, 1000)
				if i%4 == 0 {
					snaps[i] = runningAs(uint32(i+1), owner)
				}
			}
			now := int64(1000)
			c.Judge(now, c.cfg, snaps, c.pairScores)
			for i := 0; i < n; i += 4 {
				c.ReportGPUUse(usageReport("n1", 1000, uint32(i+1), owner, []float64{40}, 1000, nil))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				for _, j := range c.use.jobs {
					j.shown = -1 // a report came since the last pass
				}
				now += 30
				b.StartTimer()
				c.Judge(now, c.cfg, snaps, c.pairScores)
			}
		})
	}
}

// Dropped entries are counted by reason, and idle jobs gauged, on the
// core's /metrics.
func TestUsageMetricsCountDropsByReasonAndIdleJobs(t *testing.T) {
	c := openMetricsCore(t)
	c.cfg.GPUUse.IdleBelowPct, c.cfg.GPUUse.IdleAfter = 10, 10*time.Second
	pass(c, 1000, runningAs(1, owner))
	c.ReportGPUUse(usageReport("n1", 1000, 1, mallory, []float64{1}, 1, nil)) // wrong_user
	c.ReportGPUUse(usageReport("n1", 1000, 9, owner, []float64{1}, 1, nil))   // unknown_job
	c.ReportGPUUse(usageReport("n1", 1000, 9, owner, []float64{1}, 1, nil))   // unknown_job
	c.ReportGPUUse(usageReport("n1", 1001, 1, owner, []float64{1}, 1, nil))   // kept, idle from 1001
	c.ReportGPUUse(usageReport("n1", 1001, 1, owner, []float64{1}, 1, nil))   // repeat
	m := c.met
	for reason, want := range map[string]float64{DropWrongUser: 1, DropUnknownJob: 2, DropRepeat: 1, DropNoGPUs: 0} {
		if got := testutil.ToFloat64(m.usageDrops.WithLabelValues(reason)); got != want {
			t.Errorf("%s drops = %v, want %v", reason, got, want)
		}
	}
	pass(c, 1005, runningAs(1, owner))
	if got := testutil.ToFloat64(m.usageIdle); got != 0 {
		t.Fatalf("idle jobs after 4 s = %v, want 0", got)
	}
	pass(c, 1011, runningAs(1, owner))
	if got := testutil.ToFloat64(m.usageIdle); got != 1 {
		t.Fatalf("idle jobs after 10 s = %v, want 1", got)
	}
}

// A requeued job keeps its summary for its next run; reports while it
// waits are dropped (it is not running).
func TestRequeuedJobKeepsItsUsageSummary(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1010, runningAs(1, owner))
	c.ReportGPUUse(usageReport("n1", 1020, 1, owner, []float64{60}, 1, nil))
	waiting := pending(1, 2, 1000)
	waiting.User = owner
	pass(c, 1030, waiting)
	c.ReportGPUUse(usageReport("n1", 1035, 1, owner, []float64{0}, 1, nil)) // dropped: not running
	again := running(1, 2, 1000, 1040)
	again.User = owner
	pass(c, 1045, again)
	c.ReportGPUUse(usageReport("n1", 1050, 1, owner, []float64{20}, 1, nil))
	if u, ok := c.JobGPUUse(1); !ok || u.Samples != 2 || u.MeanUtil() != 40 || u.Finished != 0 {
		t.Fatalf("summary across the requeue %+v, want 2 samples of mean 40", u)
	}
}

// A GPU whose utilisation the agent did not know (the driver left its
// processes' samples out while the GPU was busy: docs/gpu-check.md) is
// not 0%: the job's mean is over the GPUs it knew; with none known the
// sample counts for memory only and ends an idle run. Before, a missing
// sample was read as 0% and a busy job could be called idle.
func TestUnknownUtilisationIsNotIdle(t *testing.T) {
	var logs bytes.Buffer
	cfg := testConfig(filepath.Join(t.TempDir(), "l.db"))
	cfg.GPUUse.IdleBelowPct, cfg.GPUUse.IdleAfter = 10, 60*time.Second
	c := openCoreWith(t, cfg)
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	defer c.Close()
	job := runningAs(1, owner)
	pass(c, 1000, job)
	unknown := func(t0 int64, memMB float64) *wire.JobUsageReport {
		rep := usageReport("n1", t0, 1, owner, []float64{0}, memMB, nil)
		rep.Jobs[0].GPUs[0].UtilUnknown = true
		return rep
	}
	c.ReportGPUUse(usageReport("n1", 1010, 1, owner, []float64{2}, 100, nil)) // measured idle
	for t0 := int64(1020); t0 <= 1100; t0 += 10 {
		c.ReportGPUUse(unknown(t0, 500))
	}
	pass(c, 1100, job)
	u, _ := c.JobGPUUse(1)
	if u.Samples != 1 || u.MeanUtil() != 2 || u.MemPeakMB != 500 || u.IdleSince != 0 || u.Idle(1100, 60) || u.LastSeen != 1100 {
		t.Fatalf("summary %+v: want one utilisation sample, the memory of all, no idle run", u)
	}
	if strings.Contains(logs.String(), "idle") {
		t.Fatalf("a job of unknown utilisation was called idle:\n%s", logs.String())
	}
	// Two GPUs, one known: the mean is the known one's.
	rep := usageReport("n1", 1110, 1, owner, []float64{60, 0}, 500, nil)
	rep.Jobs[0].GPUs[1].UtilUnknown = true
	c.ReportGPUUse(rep)
	if u, _ := c.JobGPUUse(1); u.Samples != 2 || u.MeanUtil() != 31 {
		t.Fatalf("summary %+v: want the second sample at 60%%", u)
	}
}
