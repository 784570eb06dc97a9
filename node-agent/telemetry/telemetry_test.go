package telemetry_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

func device(i int, power nvml.Return) *mock.Device {
	return &mock.Device{
		GetUUIDFunc:             func() (string, nvml.Return) { return "GPU-" + string(rune('a'+i)), nvml.SUCCESS },
		GetNameFunc:             func() (string, nvml.Return) { return "NVIDIA H100", nvml.SUCCESS },
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 75}, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 << 30, Used: 10 << 30}, nvml.SUCCESS
		},
		GetTemperatureFunc: func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 61, nvml.SUCCESS },
		GetPowerUsageFunc:  func() (uint32, nvml.Return) { return 312500, power },
	}
}

func library(initRet nvml.Return, devs ...*mock.Device) *mock.Interface {
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return initRet },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return devs[i], nvml.SUCCESS
		},
	}
}

func TestSampleReadsEveryGPU(t *testing.T) {
	src, err := telemetry.Open(library(nvml.SUCCESS, device(0, nvml.SUCCESS), device(1, nvml.SUCCESS)), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gpus, err := src.Sample()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 {
		t.Fatalf("%d GPUs, want 2", len(gpus))
	}
	g := gpus[1]
	if g.Index != 1 || g.UUID != "GPU-b" || g.Name != "NVIDIA H100" || g.UtilPct != 75 ||
		g.MemUsedMB != 10240 || g.MemTotalMB != 81920 || g.TempC != 61 || g.PowerW != 312.5 {
		t.Fatalf("got %+v", g)
	}
}

func TestUnsupportedValueIsZero(t *testing.T) {
	src, _ := telemetry.Open(library(nvml.SUCCESS, device(0, nvml.ERROR_NOT_SUPPORTED)), slog.New(slog.DiscardHandler))
	gpus, err := src.Sample()
	if err != nil || gpus[0].PowerW != 0 || gpus[0].UtilPct != 75 {
		t.Fatalf("got %+v, %v", gpus, err)
	}
}

func TestFailingGPUFailsTheSample(t *testing.T) {
	src, _ := telemetry.Open(library(nvml.SUCCESS, device(0, nvml.ERROR_GPU_IS_LOST)), slog.New(slog.DiscardHandler))
	if _, err := src.Sample(); !errors.Is(err, telemetry.ErrNVML) {
		t.Fatalf("got %v, want ErrNVML", err)
	}
}

func TestNoDriverIsReportedOnceAndDisablesTelemetry(t *testing.T) {
	tests := []struct {
		name string
		ret  nvml.Return
	}{
		{"missing library disables telemetry", nvml.ERROR_LIBRARY_NOT_FOUND},
		{"unloaded driver disables telemetry", nvml.ERROR_DRIVER_NOT_LOADED},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			src, err := telemetry.Open(library(tc.ret), slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("a node without a driver is not an error: %v", err)
			}
			for i := 0; i < 3; i++ {
				if _, err := src.Sample(); !errors.Is(err, telemetry.ErrNoDriver) {
					t.Fatalf("got %v, want ErrNoDriver", err)
				}
			}
			if n := strings.Count(logs.String(), "no NVIDIA driver: GPU telemetry off"); n != 1 {
				t.Fatalf("said %d times:\n%s", n, logs.String())
			}
		})
	}
}

func TestOtherInitFailureIsAnError(t *testing.T) {
	if _, err := telemetry.Open(library(nvml.ERROR_NO_PERMISSION), slog.New(slog.DiscardHandler)); !errors.Is(err, telemetry.ErrNVML) {
		t.Fatalf("got %v, want ErrNVML", err)
	}
}

func TestRealNVMLWithoutDriverIsHandled(t *testing.T) {
	// On machines without a driver (CI) this exercises the real
	// ERROR_LIBRARY_NOT_FOUND path; with one it samples real GPUs.
	src, err := telemetry.Open(nvml.New(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	gpus, err := src.Sample()
	if err != nil && !errors.Is(err, telemetry.ErrNoDriver) {
		t.Fatal(err)
	}
	t.Logf("%d GPUs, err=%v: %+v", len(gpus), err, gpus)
}
