package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/agent"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/jobprogress"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
)

// A report over the socket is counted for the caller's job (inJob: 77),
// shows on /metrics with the job as label once it has a rate, and the
// job's series is gone once slurmstepd reports the job's end.
func TestProgressReportsBecomeTheJobsRate(t *testing.T) {
	tr := jobprogress.New(jobprogress.Config{MinInterval: time.Millisecond})
	h := newHarness(t, func(_ *config.Config, d *agent.Deps) { d.ProgressTracker = tr })
	for i, n := range []uint64{100, 200} {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		ans, err := localapi.ReportProgress(context.Background(), h.cfg.Socket, n)
		if err != nil || ans.JobID != 77 || ans.Iterations != n {
			t.Fatalf("report %d: %+v, %v", n, ans, err)
		}
	}
	rate, ok := gathered(t, h.agent, jobprogress.MetricJobItersPerSec, `hpc_job="77"`)
	if !ok || rate <= 0 || rate > 1000 {
		t.Fatalf("job 77's rate on /metrics: %v (%v), want about 100/0.1 s", rate, ok)
	}
	if err := h.agent.JobEnded(localapi.Caller{}, localapi.JobEndRequest{JobID: 77, End: time.Now().Unix()}); err != nil {
		t.Fatal(err)
	}
	if _, ok := gathered(t, h.agent, jobprogress.MetricJobItersPerSec, `hpc_job="77"`); ok {
		t.Fatal("an ended job's rate is still on /metrics")
	}
}

// A caller in no job of theirs is refused, counted, and leaves nothing.
func TestProgressFromOutsideAJobIsRefused(t *testing.T) {
	tr := jobprogress.New(jobprogress.Config{})
	h := newHarness(t, func(_ *config.Config, d *agent.Deps) {
		d.ProgressTracker = tr
		d.CallerJob = func(context.Context, localapi.Caller, string) (agent.CallerJob, error) {
			return agent.CallerJob{}, agent.ErrNoJob
		}
	})
	_, err := localapi.ReportProgress(context.Background(), h.cfg.Socket, 5)
	if err == nil || !strings.Contains(err.Error(), "from inside a Slurm job of yours") {
		t.Fatalf("got %v", err)
	}
	if n, _ := gathered(t, h.agent, jobprogress.MetricProgressReports, `outcome="refused"`); n != 1 || tr.Jobs() != 0 {
		t.Fatalf("%v refusals counted, %d jobs tracked", n, tr.Jobs())
	}
}

// Without a tracker, reports are refused with a reason.
func TestProgressOffWithoutATracker(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.agent.ReportProgress(context.Background(), aliceCaller, localapi.ProgressReport{Iterations: 1}); !errors.Is(err, agent.ErrProgressOff) {
		t.Fatalf("got %v", err)
	}
}
