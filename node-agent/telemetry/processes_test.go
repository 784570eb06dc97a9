package telemetry_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// withProcesses gives a mock GPU running procs, whose utilisation samples
// util returns for the lastSeen timestamp it is asked with.
func withProcesses(d *mock.Device, procs []nvml.ProcessInfo, procRet nvml.Return,
	util func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return)) *mock.Device {
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return procs, procRet }
	d.GetProcessUtilizationFunc = util
	return d
}

func openProcs(t *testing.T, devs ...*mock.Device) telemetry.ProcessSource {
	t.Helper()
	src, err := telemetry.Open(library(nvml.SUCCESS, devs...), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src.(telemetry.ProcessSource)
}

func TestProcessesReadsMemoryAndUtilisationSinceLastCall(t *testing.T) {
	var asked []uint64
	dev := withProcesses(device(0, nvml.SUCCESS),
		[]nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 2 << 30}, {Pid: 200, UsedGpuMemory: 512 << 20}}, nvml.SUCCESS,
		func(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			asked = append(asked, lastSeen)
			if lastSeen >= 30 {
				return nil, nvml.ERROR_NOT_FOUND
			}
			return []nvml.ProcessUtilizationSample{
				{Pid: 100, TimeStamp: 10, SmUtil: 40},
				{Pid: 100, TimeStamp: 30, SmUtil: 60},
				{Pid: 200, TimeStamp: 20, SmUtil: 15},
			}, nvml.SUCCESS
		})
	src := openProcs(t, dev)
	got, err := src.Processes()
	if err != nil {
		t.Fatal(err)
	}
	want := []telemetry.GPUProcess{
		{GPU: 0, UUID: "GPU-a", PID: 100, MemUsedMB: 2048, MemTotalMB: 81920, UtilPct: 50, UtilKnown: true},
		{GPU: 0, UUID: "GPU-a", PID: 200, MemUsedMB: 512, MemTotalMB: 81920, UtilPct: 15, UtilKnown: true},
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// The next call asks only for samples after the newest one counted;
	// NVML's NOT_FOUND (none newer) on a busy GPU (75%) leaves the
	// processes' utilisation unknown, never 0%; on an idle GPU they were
	// idle.
	got, err = src.Processes()
	if err != nil || len(got) != 2 || got[0].UtilPct != 0 || got[0].UtilKnown || got[1].UtilKnown {
		t.Fatalf("second call, the GPU busy: %+v, %v; want utilisation unknown", got, err)
	}
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 0}, nvml.SUCCESS }
	got, err = src.Processes()
	if err != nil || len(got) != 2 || got[0].UtilPct != 0 || !got[0].UtilKnown || !got[1].UtilKnown {
		t.Fatalf("third call, the GPU idle: %+v, %v; want known idle", got, err)
	}
	if len(asked) != 3 || asked[0] != 0 || asked[1] != 30 || asked[2] != 30 {
		t.Fatalf("asked for samples after %v, want [0 30 30]", asked)
	}
}

func TestProcessesWithoutPerProcessUtilisationKeepMemory(t *testing.T) {
	dev := withProcesses(device(0, nvml.SUCCESS),
		[]nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}, {Pid: 300, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS,
		func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED })
	got, err := openProcs(t, dev).Processes()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].MemUsedMB != 1024 || got[0].UtilKnown || got[1].MemUsedMB != 0 {
		t.Fatalf("got %+v: want memory kept, utilisation unknown, unavailable memory as 0", got)
	}
}

func TestProcessesOfAGPUThatListsNoneAreSkipped(t *testing.T) {
	unsupported := withProcesses(device(0, nvml.SUCCESS), nil, nvml.ERROR_NOT_SUPPORTED, nil)
	running := withProcesses(device(1, nvml.SUCCESS), []nvml.ProcessInfo{{Pid: 7, UsedGpuMemory: 1 << 20}}, nvml.SUCCESS,
		func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND })
	got, err := openProcs(t, unsupported, running).Processes()
	if err != nil || len(got) != 1 || got[0].GPU != 1 || got[0].PID != 7 {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestProcessThatVanishedHasNoUtilisation(t *testing.T) {
	// The utilisation buffer still holds samples of pid 999, which ended
	// and is no longer listed: it is not reported, and the listed process
	// without samples is not read as idle on a busy GPU (75%): its
	// utilisation is unknown (docs/gpu-check.md: a process busy 25% of
	// the time had none on an H200).
	dev := withProcesses(device(0, nvml.SUCCESS), []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 20}}, nvml.SUCCESS,
		func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return []nvml.ProcessUtilizationSample{{Pid: 999, TimeStamp: 5, SmUtil: 90}}, nvml.SUCCESS
		})
	got, err := openProcs(t, dev).Processes()
	if err != nil || len(got) != 1 || got[0].PID != 100 || got[0].UtilPct != 0 || got[0].UtilKnown {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestProcessListFailureFailsTheCall(t *testing.T) {
	dev := withProcesses(device(0, nvml.SUCCESS), nil, nvml.ERROR_GPU_IS_LOST, nil)
	if _, err := openProcs(t, dev).Processes(); !errors.Is(err, telemetry.ErrNVML) {
		t.Fatalf("got %v, want ErrNVML", err)
	}
}

// A GPU whose driver cannot tell its memory still lists its processes,
// with the GPU's memory unknown (0: the controller bounds nothing by it).
func TestProcessesOfAGPUWithoutMemoryInfoHaveTotalUnknown(t *testing.T) {
	dev := withProcesses(device(0, nvml.SUCCESS), []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}}, nvml.SUCCESS,
		func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND })
	dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_NOT_SUPPORTED }
	got, err := openProcs(t, dev).Processes()
	if err != nil || len(got) != 1 || got[0].MemUsedMB != 1024 || got[0].MemTotalMB != 0 {
		t.Fatalf("got %+v, %v: want the process, its memory, the GPU's unknown", got, err)
	}
}
