package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Sentinel errors.
var (
	// ErrNoDriver: NVML's library is not installed; telemetry is off.
	ErrNoDriver = errors.New("no NVIDIA driver: GPU telemetry off")
	// ErrNVML wraps every other NVML failure.
	ErrNVML = errors.New("nvml")
)

// Source samples the node's GPUs.
type Source interface {
	Sample() ([]wire.GPU, error)
	Close() error
}

// NVML is a Source backed by an initialised NVML library.
type NVML struct {
	lib nvml.Interface
	log *slog.Logger

	mu     sync.Mutex
	closed bool
	// lastSeen: per GPU ("index/uuid"), the newest per-process
	// utilisation sample already counted (processes.go).
	lastSeen map[string]uint64
}

// Disabled is the Source of a node without GPUs to watch.
type Disabled struct{ Reason error }

var (
	_ Source = (*NVML)(nil)
	_ Source = Disabled{}
)

// Sample implements Source.
func (d Disabled) Sample() ([]wire.GPU, error) { return nil, d.Reason }

// Close implements Source.
func (Disabled) Close() error { return nil }

const keyErr = "err"

// Open initialises NVML through lib (nvml.New() in production). Without
// an NVIDIA driver it logs so once and returns a Disabled source whose
// samples fail with ErrNoDriver; the agent is not expected to retry.
func Open(lib nvml.Interface, log *slog.Logger) (Source, error) {
	ret := lib.Init()
	switch ret {
	case nvml.SUCCESS:
		return &NVML{lib: lib, log: log}, nil
	case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
		log.Info(ErrNoDriver.Error(), keyErr, ret.Error())
		return Disabled{Reason: ErrNoDriver}, nil
	}
	return Disabled{Reason: fmt.Errorf("%w: init: %v", ErrNVML, ret)}, fmt.Errorf("%w: init: %v", ErrNVML, ret)
}

// Sample implements Source: one reading of every GPU, by index.
func (n *NVML) Sample() ([]wire.GPU, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("%w: sampled after Close", ErrNVML)
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: device count: %v", ErrNVML, ret)
	}
	out := make([]wire.GPU, 0, count)
	for i := 0; i < count; i++ {
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("%w: GPU %d: %v", ErrNVML, i, ret)
		}
		g, err := sampleDevice(i, dev)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// sampleDevice reads one GPU. Unsupported values stay 0; other failures
// fail the sample.
func sampleDevice(i int, dev nvml.Device) (wire.GPU, error) {
	g := wire.GPU{Index: i}
	var errs []error
	check := func(what string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return true
		case nvml.ERROR_NOT_SUPPORTED:
			return false
		}
		errs = append(errs, fmt.Errorf("%s: %v", what, ret))
		return false
	}
	if uuid, ret := dev.GetUUID(); check("uuid", ret) {
		g.UUID = uuid
	}
	if name, ret := dev.GetName(); check("name", ret) {
		g.Name = name
	}
	if u, ret := dev.GetUtilizationRates(); check("utilization", ret) {
		g.UtilPct = float64(u.Gpu)
	}
	if m, ret := dev.GetMemoryInfo(); check("memory", ret) {
		g.MemUsedMB = float64(m.Used) / (1 << 20)
		g.MemTotalMB = float64(m.Total) / (1 << 20)
	}
	if t, ret := dev.GetTemperature(nvml.TEMPERATURE_GPU); check("temperature", ret) {
		g.TempC = float64(t)
	}
	if mw, ret := dev.GetPowerUsage(); check("power", ret) {
		g.PowerW = float64(mw) / 1000
	}
	if len(errs) > 0 {
		return wire.GPU{}, fmt.Errorf("%w: GPU %d: %w", ErrNVML, i, errors.Join(errs...))
	}
	return g, nil
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("%w: shutdown: %v", ErrNVML, ret)
	}
	return nil
}
