package telemetry_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

func TestCollectorExportsEveryGPU(t *testing.T) {
	src, err := telemetry.Open(library(nvml.SUCCESS, device(0, nvml.SUCCESS), device(1, nvml.SUCCESS)), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := `
# HELP lachesis_agent_gpu_power_watts GPU power draw (NVML), watts.
# TYPE lachesis_agent_gpu_power_watts gauge
lachesis_agent_gpu_power_watts{gpu="0",name="NVIDIA H100",uuid="GPU-a"} 312.5
lachesis_agent_gpu_power_watts{gpu="1",name="NVIDIA H100",uuid="GPU-b"} 312.5
# HELP lachesis_agent_gpu_memory_used_bytes GPU memory in use (NVML), bytes.
# TYPE lachesis_agent_gpu_memory_used_bytes gauge
lachesis_agent_gpu_memory_used_bytes{gpu="0",name="NVIDIA H100",uuid="GPU-a"} 1.073741824e+10
lachesis_agent_gpu_memory_used_bytes{gpu="1",name="NVIDIA H100",uuid="GPU-b"} 1.073741824e+10
# HELP lachesis_agent_gpu_temperature_celsius GPU core temperature (NVML), degrees Celsius.
# TYPE lachesis_agent_gpu_temperature_celsius gauge
lachesis_agent_gpu_temperature_celsius{gpu="0",name="NVIDIA H100",uuid="GPU-a"} 61
lachesis_agent_gpu_temperature_celsius{gpu="1",name="NVIDIA H100",uuid="GPU-b"} 61
# HELP lachesis_agent_gpu_utilization_percent GPU utilisation (NVML), percent.
# TYPE lachesis_agent_gpu_utilization_percent gauge
lachesis_agent_gpu_utilization_percent{gpu="0",name="NVIDIA H100",uuid="GPU-a"} 75
lachesis_agent_gpu_utilization_percent{gpu="1",name="NVIDIA H100",uuid="GPU-b"} 75
# HELP lachesis_agent_gpu_telemetry_up 1 if the last scrape's NVML sample succeeded, else 0 (no driver, or NVML failing).
# TYPE lachesis_agent_gpu_telemetry_up gauge
lachesis_agent_gpu_telemetry_up 1
`
	if err := testutil.CollectAndCompare(telemetry.NewCollector(src), strings.NewReader(want),
		telemetry.MetricGPUPower, telemetry.MetricGPUMemUsed, telemetry.MetricGPUTemperature,
		telemetry.MetricGPUUtil, telemetry.MetricGPUUp); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(telemetry.NewCollector(src), telemetry.MetricGPUMemTotal); n != 2 {
		t.Fatalf("%d memory-total series, want 2", n)
	}
}

func TestCollectorWithoutGPUsExportsOnlyDown(t *testing.T) {
	noDriver, _ := telemetry.Open(library(nvml.ERROR_LIBRARY_NOT_FOUND), slog.New(slog.DiscardHandler))
	failing, _ := telemetry.Open(library(nvml.SUCCESS, device(0, nvml.ERROR_GPU_IS_LOST)), slog.New(slog.DiscardHandler))
	tests := []struct {
		name string
		src  telemetry.Source
	}{
		{"no source exports telemetry down", nil},
		{"no driver exports telemetry down", noDriver},
		{"a lost GPU exports telemetry down and no GPU series", failing},
	}
	want := `
# HELP lachesis_agent_gpu_telemetry_up 1 if the last scrape's NVML sample succeeded, else 0 (no driver, or NVML failing).
# TYPE lachesis_agent_gpu_telemetry_up gauge
lachesis_agent_gpu_telemetry_up 0
`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := telemetry.NewCollector(tt.src)
			if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
