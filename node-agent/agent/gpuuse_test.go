package agent_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/agent"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// gpuProcs is a ProcessSource whose processes a test changes.
type gpuProcs struct {
	mu    sync.Mutex
	procs []telemetry.GPUProcess
}

func (g *gpuProcs) Processes() ([]telemetry.GPUProcess, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.procs, nil
}

func (g *gpuProcs) set(p ...telemetry.GPUProcess) {
	g.mu.Lock()
	g.procs = p
	g.mu.Unlock()
}

type progressOf map[uint32]wire.JobProgress

func (p progressOf) Progress(time.Time) map[uint32]wire.JobProgress { return p }

// pid 100 and 101 run in jobs 5 and 6 (alice's); pid 200 in none.
func jobOfPID(pid int) (uint32, uint32, string) {
	switch pid {
	case 100:
		return 5, alice, ""
	case 101:
		return 6, alice, ""
	}
	return 0, alice, "no_job"
}

// Per-job GPU use is exported on /metrics while the job runs and gone once
// it ends; a process outside any job is counted, never attributed (a
// sharer of its GPU, no job's); the
// controller (which has no handler for usage reports yet) refuses every
// report, which is counted each time and logged once.
func TestGPUUseIsExportedAndItsRefusalsCountedNotSpammed(t *testing.T) {
	src := &gpuProcs{}
	src.set(
		telemetry.GPUProcess{GPU: 0, UUID: "GPU-a", PID: 100, UtilPct: 60, MemUsedMB: 1024, UtilKnown: true},
		telemetry.GPUProcess{GPU: 0, UUID: "GPU-a", PID: 101, UtilPct: 30, MemUsedMB: 512, UtilKnown: true},
		telemetry.GPUProcess{GPU: 0, UUID: "GPU-a", PID: 200, UtilPct: 10, MemUsedMB: 64, UtilKnown: true},
	)
	h := newHarness(t, func(c *config.Config, d *agent.Deps) {
		c.TelemetryInterval = 20 * time.Millisecond
		d.Processes = src
		d.ProcessJob = jobOfPID
		d.Progress = progressOf{5: {Iterations: 40, ItersPerSec: 2}}
	})
	h.startController()
	waitFor(t, "job 5's GPU use on /metrics", func() bool {
		v, ok := gathered(t, h.agent, agent.MetricJobGPUUtil, `hpc_job="5"`)
		return ok && v == 60
	})
	tests := []struct {
		metric, labels string
		want           float64
	}{
		{agent.MetricJobGPUUtil, `gpu="0",hpc_job="6",uuid="GPU-a"`, 30},
		{agent.MetricJobGPUMemUsed, `gpu="0",hpc_job="5"`, 1 << 30},
		// Jobs 5 and 6, and pid 200's use, which no job accounts for.
		{agent.MetricJobGPUSharers, `hpc_job="5"`, 3},
		{agent.MetricJobGPUSharers, `hpc_job="6"`, 3},
		{agent.MetricGPUProcessesOutsideJobs, `reason="no_job"`, 1},
	}
	for _, tt := range tests {
		if got, ok := gathered(t, h.agent, tt.metric, tt.labels); !ok || got != tt.want {
			t.Errorf("%s{%s} = %v (found %v), want %v", tt.metric, tt.labels, got, ok, tt.want)
		}
	}
	waitFor(t, "several refused reports", func() bool {
		n, _ := gathered(t, h.agent, agent.MetricDeliveryFailures, `kind="job_usage"`)
		return n >= 5
	})
	if n := strings.Count(h.logs.String(), "the controller refused per-job GPU usage"); n != 1 {
		t.Fatalf("the refusal was logged %d times, want once a minute:\n%s", n, h.logs)
	}
	// Job 6 ends: its series go, job 5 has the GPU alone.
	src.set(telemetry.GPUProcess{GPU: 0, UUID: "GPU-a", PID: 100, UtilPct: 60, MemUsedMB: 1024, UtilKnown: true})
	waitFor(t, "job 6's series to go", func() bool {
		_, ok := gathered(t, h.agent, agent.MetricJobGPUUtil, `hpc_job="6"`)
		s, _ := gathered(t, h.agent, agent.MetricJobGPUSharers, `hpc_job="5"`)
		return !ok && s == 1
	})
}
