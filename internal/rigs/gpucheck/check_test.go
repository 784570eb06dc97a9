package gpucheck

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/lachesis-sched/lachesis/internal/rigs/gpuload"
)

// simGPU is one GPU whose NVML keeps a utilisation sample of each load
// every 100 ms of the fake clock (smUtil its busy share, times scale), and
// whose nvidia-smi reports the same processes: the device is faked, the
// agent's path (telemetry.Open, NVML.Processes) is the real one.
type simGPU struct {
	clock      *fakeClock
	start      time.Time
	loads      []Load
	scale      float64 // the agent's view of utilisation, against the truth
	smiMemDiff float64 // what nvidia-smi adds to a process's memory
	procsErr   nvml.Return
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.t = c.t.Add(d)
	return ctx.Err()
}

var _ gpuload.Clock = (*fakeClock)(nil)

func (g *simGPU) lib() nvml.Interface {
	dev := &mock.Device{
		GetUUIDFunc:             func() (string, nvml.Return) { return "GPU-a", nvml.SUCCESS },
		GetNameFunc:             func() (string, nvml.Return) { return "NVIDIA H100", nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 85}, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 81559 << 20, Used: 9300 << 20}, nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 40, nvml.SUCCESS },
		GetPowerUsageFunc:  func() (uint32, nvml.Return) { return 300000, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			if g.procsErr != nvml.SUCCESS {
				return nil, g.procsErr
			}
			var ps []nvml.ProcessInfo
			for _, l := range g.loads {
				ps = append(ps, nvml.ProcessInfo{Pid: uint32(l.PID), UsedGpuMemory: uint64(l.MemMiB+518) << 20})
			}
			return ps, nvml.SUCCESS
		},
		GetProcessUtilizationFunc: func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			var out []nvml.ProcessUtilizationSample
			for t := g.start; !t.After(g.clock.t); t = t.Add(100 * time.Millisecond) {
				ts := uint64(t.UnixMicro())
				if ts <= since {
					continue
				}
				for _, l := range g.loads {
					out = append(out, nvml.ProcessUtilizationSample{Pid: uint32(l.PID), TimeStamp: ts, SmUtil: uint32(l.BusyPct * g.scale)})
				}
			}
			if len(out) == 0 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return out, nvml.SUCCESS
		},
		GetMPSComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS },
	}
	return &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
	}
}

// ComputeApps, Pmon and GPUs make simGPU the driver's side too.
func (g *simGPU) ComputeApps(context.Context) ([]App, error) {
	var apps []App
	for _, l := range g.loads {
		apps = append(apps, App{PID: l.PID, UUID: "GPU-a", MemMiB: float64(l.MemMiB+518) + g.smiMemDiff, MemKnown: true})
	}
	return apps, nil
}

func (g *simGPU) Pmon(_ context.Context, seconds int) ([]PmonSample, error) {
	var s []PmonSample
	for i := 0; i < seconds; i++ {
		for _, l := range g.loads {
			s = append(s, PmonSample{PID: l.PID, SM: l.BusyPct, SMKnown: true})
		}
	}
	return s, nil
}

func (g *simGPU) GPUs(context.Context) ([]GPUInfo, error) {
	return []GPUInfo{{UUID: "GPU-a", MemUsedMiB: 9300, MemTotalMiB: 81559, UtilPct: 85, UtilKnown: true}}, nil
}

// pairOf is a phase of g's loads over rounds of 5 and 30 s.
func pairOf(g *simGPU, mps bool) Config {
	return Config{Phase: "pair", Loads: g.loads, MPS: mps,
		Intervals: []time.Duration{5 * time.Second, 30 * time.Second}, Tol: DefaultTolerance}
}

// runSim runs the phase cfg on g, through the agent's own source.
func runSim(t *testing.T, g *simGPU, cfg Config) (Result, string) {
	t.Helper()
	lib := g.lib()
	gpus, procs, err := OpenAgent(lib, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer gpus.Close()
	var out strings.Builder
	res, err := Run(context.Background(), cfg,
		Sources{Agent: procs, AgentGPUs: gpus, Driver: g, Raw: NVMLRaw{Lib: lib}, Clock: g.clock,
			Name: func(int) string { return "lachesis-gpuload" }}, &out)
	if err != nil {
		t.Fatal(err)
	}
	return res, out.String()
}

func newSim() *simGPU {
	start := time.Unix(1.7e9, 0)
	return &simGPU{clock: &fakeClock{t: start.Add(10 * time.Second)}, start: start, loads: twoLoads, scale: 1}
}

func TestRunPassesWhenTheAgentReadsWhatTheDriverReports(t *testing.T) {
	g := newSim()
	res, out := runSim(t, g, pairOf(g, false))
	if res.Fails != 0 || len(res.Rounds) != 2 {
		t.Fatalf("%d fails over %d rounds, want 0 over 2:\n%s", res.Fails, len(res.Rounds), out)
	}
	r := res.Rounds[1]
	if r.Window != 30*time.Second || r.Agent[0].UtilPct != 60 || r.Agent[1].MemUsedMB != 6662 {
		t.Fatalf("round 2: window %v, agent %+v", r.Window, r.Agent)
	}
	// The diagnostics count NVML's samples over the round: 300 per load.
	if u := r.Raw[0]; u.Samples != 600 || u.PerPID[100] != 300 || u.Last-u.First != 29_900_000 {
		t.Fatalf("raw samples %+v, want 300 per pid over 29.9 s", u)
	}
	wantAll(t, out,
		"== phase pair: a pid 100 busy 60% 2048 MiB; b pid 200 busy 25% 6144 MiB",
		"agent's first call (not judged",
		"-- round 2/2: 30.0 s since the agent's last call",
		"  100      lachesis-gpuload a          60%      60.0%     60.0%     2048     2566.0     2566        -",
		"[ok] pid 200 utilisation vs busy set: agent 25.0% over 30.0 s, busy set 25%",
		"NVML samples (diagnostic), GPU 0: 600 per-process utilisation samples spanning 29.9 s (per pid 100:300 200:300)",
		"== phase pair: PASS (2 rounds, 0 disagreement(s) of the agent with the driver beyond tolerance; 0 where the driver's own figure was as far off the load)",
	)
}

func TestRunFailsWhenTheAgentsUtilisationIsOff(t *testing.T) {
	g := newSim()
	g.scale = 0.5
	res, out := runSim(t, g, pairOf(g, false))
	// Load a (60% read as 30%) is off the busy share and pmon in both
	// rounds; load b (25% as 12%) stays within 15 points.
	if res.Fails != 4 || !strings.Contains(out, "[FAIL] pid 100 utilisation vs pmon: agent 30.0%, pmon mean 60.0%") ||
		!strings.Contains(out, "== phase pair: FAIL (2 rounds, 4 disagreement(s) of the agent") {
		t.Fatalf("%d fails, want 4:\n%s", res.Fails, out)
	}
}

func TestRunFailsWhenTheAgentsMemoryIsOff(t *testing.T) {
	g := newSim()
	g.smiMemDiff = 64
	res, out := runSim(t, g, pairOf(g, false))
	if res.Fails != 4 || !strings.Contains(out, "[FAIL] pid 200 memory vs nvidia-smi: agent 6662.0 MiB, nvidia-smi 6726 MiB (-64.0") {
		t.Fatalf("%d fails, want 4:\n%s", res.Fails, out)
	}
}

func TestRunFailsWhenTheAgentsPathFails(t *testing.T) {
	g := newSim()
	g.procsErr = nvml.ERROR_GPU_IS_LOST
	res, out := runSim(t, g, pairOf(g, false))
	if res.Fails != 2 || !strings.Contains(out, "[FAIL] agent: the agent's NVML path failed: nvml: GPU 0: running processes: ERROR_GPU_IS_LOST") {
		t.Fatalf("%d fails, want 2:\n%s", res.Fails, out)
	}
}

func TestRunPrintsWhatTheAgentSeesOfMPSClients(t *testing.T) {
	g := newSim()
	_, out := runSim(t, g, pairOf(g, true))
	wantAll(t, out,
		"MPS: client a pid 100: in the agent's list, 2566.0 MiB (allocated 2048), utilisation 60.0%",
		"MPS: NVML's MPS list (not read by the agent): 0 process(es) []",
		"MPS: => the agent's list shows 2 of 2 MPS clients by their own pid (2 with memory)",
	)
}

func TestOpenAgentFailsWhereTheAgentWouldRunWithoutTelemetry(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, _, err := OpenAgent(lib, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "GPU telemetry off") {
		t.Fatalf("err = %v, want 'GPU telemetry off'", err)
	}
	lib = &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_NO_PERMISSION }}
	if _, _, err := OpenAgent(lib, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "ERROR_NO_PERMISSION") {
		t.Fatalf("err = %v, want the init failure named", err)
	}
}

func TestRunCadenceShowsHowOftenNVMLHandsOutASample(t *testing.T) {
	g := newSim()
	res, out := runSim(t, g, Config{Phase: "cadence", Loads: g.loads[:1], Cadence: time.Second, Tol: DefaultTolerance})
	// The simulated driver keeps a sample every 100 ms: polled every
	// 50 ms for 1 s, each pid shows a new one every other poll (its
	// first poll takes the newest of the history).
	if len(res.Cadence) != 2 || res.Cadence[0].PID != 100 || res.Cadence[0].Polls != 20 || len(res.Cadence[0].AtMs) != 10 {
		t.Fatalf("cadence %+v", res.Cadence)
	}
	if !strings.Contains(out, "GPU 0 pid 100: 10 new samples in 20 polls (at most 110 kept at once), one every 100 ms: 60@0.0s 60@0.1s") {
		t.Fatalf("report:\n%s", out)
	}
}

// wantAll fails t for each of wants that out does not contain.
func wantAll(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
