//go:build cgo

package profiler

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// fakeNVML is a node of GPUs whose utilisation is util[i].
func fakeNVML(util ...uint32) *mock.Interface {
	devices := make([]nvml.Device, len(util))
	for i, u := range util {
		devices[i] = &mock.Device{
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: u}, nvml.SUCCESS
			},
		}
	}
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devices), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devices[i], nvml.SUCCESS
		},
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if uuid == "GPU-second" && len(devices) > 1 {
				return devices[1], nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}
}

// watchFor samples sig for d and returns the point's result.
func watchFor(sig *nvmlSignal, d time.Duration) (float64, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	w := sig.Watch(ctx)
	<-ctx.Done()
	return w.Result(start)
}

func TestNVMLSignal_MeanUtilisationOfTheWorkloadsGPUs(t *testing.T) {
	cases := []struct {
		name    string
		util    []uint32
		gpus    int
		visible []string
		want    float64
	}{
		{"first GPU by default", []uint32{60, 10}, 1, nil, 60},
		{"first two GPUs for a 2-GPU workload", []uint32{60, 20, 5}, 2, nil, 40},
		{"CUDA_VISIBLE_DEVICES index", []uint32{60, 20}, 1, []string{"1"}, 20},
		{"CUDA_VISIBLE_DEVICES UUID", []uint32{60, 30}, 1, []string{"GPU-second"}, 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sig, shutdown, err := newNVMLSignal(fakeNVML(c.util...), c.gpus, c.visible)
			if err != nil {
				t.Fatal(err)
			}
			defer shutdown()
			sig.every = 5 * time.Millisecond
			got, n, err := watchFor(sig, 60*time.Millisecond)
			if err != nil || got != c.want || n == 0 {
				t.Fatalf("utilisation %v over %d samples, %v; want %v", got, n, err, c.want)
			}
		})
	}
}

func TestNVMLSignal_IdleGPUIsNoThroughput(t *testing.T) {
	sig, shutdown, err := newNVMLSignal(fakeNVML(0), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown()
	sig.every = 5 * time.Millisecond
	if _, _, err := watchFor(sig, 40*time.Millisecond); !errors.Is(err, ErrNoThroughput) {
		t.Fatalf("err = %v, want ErrNoThroughput", err)
	}
}

func TestNewNVMLSignal_NoGPUSignal(t *testing.T) {
	noLibrary := fakeNVML(50)
	noLibrary.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	noDevice := fakeNVML()
	cases := []struct {
		name    string
		lib     nvml.Interface
		gpus    int
		visible []string
	}{
		{"library not found (no driver)", noLibrary, 1, nil},
		{"no GPU on the node", noDevice, 1, nil},
		{"more GPUs than the node has", fakeNVML(50), 2, nil},
		{"unknown CUDA_VISIBLE_DEVICES entry", fakeNVML(50), 1, []string{"GPU-nope"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := newNVMLSignal(c.lib, c.gpus, c.visible); !errors.Is(err, ErrNoGPUSignal) {
				t.Fatalf("err = %v, want ErrNoGPUSignal", err)
			}
		})
	}
}

// On a machine without the NVIDIA driver the real library is not found,
// and that is a clear ErrNoGPUSignal, not a crash or a zero signal.
func TestOpenGPUSignal_WithoutADriverIsNoGPUSignal(t *testing.T) {
	sig, shutdown, err := openGPUSignal(normalised{gpus: 1})
	if err == nil {
		shutdown()
		t.Skipf("an NVIDIA driver is present here (%s signal opened)", sig.Name())
	}
	if !errors.Is(err, ErrNoGPUSignal) {
		t.Fatalf("err = %v, want ErrNoGPUSignal", err)
	}
	t.Log(err)
}

func TestVisibleDevices(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"unset", []string{"PATH=/bin"}, nil},
		{"indices", []string{"CUDA_VISIBLE_DEVICES=0, 2"}, []string{"0", "2"}},
		{"the last setting wins", []string{"CUDA_VISIBLE_DEVICES=0", "CUDA_VISIBLE_DEVICES=GPU-x"}, []string{"GPU-x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := visibleDevices(c.env)
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("got %q, want %q", got, c.want)
				}
			}
		})
	}
}
