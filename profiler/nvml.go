//go:build cgo

package profiler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// openGPUSignal opens NVML through the driver's libnvidia-ml.so.1. The
// returned close function shuts NVML down.
func openGPUSignal(spec normalised) (Signal, func(), error) {
	return newNVMLSignal(nvml.New(), spec.gpus, visibleDevices(spec.Env))
}

// nvmlSignal reads the mean utilisation of the workload's GPUs, in percent,
// as a proxy for its throughput: a data-starved GPU idles between steps,
// so its busy fraction rises and falls with the samples it is fed.
type nvmlSignal struct {
	devices []nvml.Device
	every   time.Duration
}

var _ Signal = (*nvmlSignal)(nil)

// newNVMLSignal initialises lib and picks the workload's devices: those
// named by CUDA_VISIBLE_DEVICES (indices or UUIDs) if set, else the first
// gpus of the node. On a machine without the NVIDIA driver, lib.Init
// reports ERROR_LIBRARY_NOT_FOUND, which becomes ErrNoGPUSignal.
func newNVMLSignal(lib nvml.Interface, gpus int, visible []string) (*nvmlSignal, func(), error) {
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, nil, fmt.Errorf("%w: NVML library not found (no NVIDIA driver on this node)", ErrNoGPUSignal)
	default:
		return nil, nil, fmt.Errorf("%w: NVML init: %v", ErrNoGPUSignal, ret)
	}
	shutdown := func() { lib.Shutdown() }
	fail := func(err error) (*nvmlSignal, func(), error) {
		shutdown()
		return nil, nil, err
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fail(fmt.Errorf("%w: NVML device count: %v", ErrNoGPUSignal, ret))
	}
	if count == 0 {
		return fail(fmt.Errorf("%w: NVML sees no GPU on this node", ErrNoGPUSignal))
	}
	if visible == nil {
		if gpus > count {
			return fail(fmt.Errorf("%w: the workload uses %d GPUs, NVML sees %d", ErrNoGPUSignal, gpus, count))
		}
		for i := range gpus {
			visible = append(visible, strconv.Itoa(i))
		}
	}
	s := &nvmlSignal{every: nvmlSampleEvery}
	for _, id := range visible {
		var dev nvml.Device
		if i, err := strconv.Atoi(id); err == nil {
			dev, ret = lib.DeviceGetHandleByIndex(i)
		} else {
			dev, ret = lib.DeviceGetHandleByUUID(id)
		}
		if ret != nvml.SUCCESS {
			return fail(fmt.Errorf("%w: GPU %q of CUDA_VISIBLE_DEVICES: %v", ErrNoGPUSignal, id, ret))
		}
		s.devices = append(s.devices, dev)
	}
	return s, shutdown, nil
}

func (*nvmlSignal) Name() string { return "nvml" }

func (s *nvmlSignal) Watch(ctx context.Context) Watch {
	w := &nvmlWatch{done: make(chan struct{})}
	go w.sample(ctx, s.devices, s.every)
	return w
}

type nvmlWatch struct {
	done     chan struct{}
	mu       sync.Mutex
	readings []reading
	lastErr  nvml.Return
}

var _ Watch = (*nvmlWatch)(nil)

func (w *nvmlWatch) sample(ctx context.Context, devices []nvml.Device, every time.Duration) {
	defer close(w.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			sum, n := 0.0, 0
			for _, d := range devices {
				u, ret := d.GetUtilizationRates()
				if ret != nvml.SUCCESS {
					w.mu.Lock()
					w.lastErr = ret
					w.mu.Unlock()
					continue
				}
				sum += float64(u.Gpu)
				n++
			}
			if n == len(devices) {
				w.mu.Lock()
				w.readings = append(w.readings, reading{now, sum / float64(n)})
				w.mu.Unlock()
			}
		}
	}
}

// Line ignores the output: the signal is the GPU.
func (*nvmlWatch) Line(time.Time, string) {}

// Result is the mean utilisation after warm-up: each sample is a busy
// fraction over one short period, so the mean over the point is the
// point's busy fraction.
func (w *nvmlWatch) Result(warmEnd time.Time) (float64, int, error) {
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.readings) == 0 {
		why := "the point was too short"
		if w.lastErr != nvml.SUCCESS {
			why = "NVML: " + strings.ToLower(w.lastErr.Error())
		}
		return 0, 0, fmt.Errorf("%w: no GPU utilisation sample (%s)", ErrNoThroughput, why)
	}
	vals := steadyValues(w.readings, warmEnd)
	v := mean(vals)
	if v == 0 {
		return 0, len(vals), fmt.Errorf("%w: GPU utilisation stayed at 0%% (does the workload use the GPU?)", ErrNoThroughput)
	}
	return v, len(vals), nil
}
