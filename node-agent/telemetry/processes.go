package telemetry

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPUProcess is one process's use of one GPU, as the device reports it.
// It says nothing about which job the process belongs to: the agent finds
// that out from the kernel (node-agent/agent/gpuuse.go, node-agent/procjob).
type GPUProcess struct {
	GPU  int
	UUID string
	PID  int
	// MemUsedMB is the GPU memory the process holds (0 where the driver
	// cannot tell, e.g. under some virtualisation).
	MemUsedMB float64
	// MemTotalMB is the memory of the process's GPU (0 where the driver
	// cannot tell): what the controller's memory bound for opportunistic
	// jobs is a share of.
	MemTotalMB float64
	// UtilPct is the process's share of the GPU's time (SM utilisation
	// over the interval since the last call), 0..100; 0 when UtilKnown is
	// false: the GPU has no per-process counters, or the process had no
	// sample while the GPU was busy (unknown, not idle).
	UtilPct   float64
	UtilKnown bool
}

// ProcessSource lists the processes running on the node's GPUs.
type ProcessSource interface {
	Processes() ([]GPUProcess, error)
}

var _ ProcessSource = (*NVML)(nil)

// notAvailable is NVML_VALUE_NOT_AVAILABLE, what UsedGpuMemory holds when
// the driver cannot account a process's memory.
const notAvailable = ^uint64(0)

// Processes implements ProcessSource: the compute processes of every GPU
// with the memory they hold, and their SM utilisation over the samples
// NVML took since the previous call (nvmlDeviceGetProcessUtilization with
// the last timestamp seen on that GPU). A GPU or driver that does not
// support per-process utilisation leaves UtilKnown false; one whose
// process list fails fails the call. A process that ended between the two
// NVML calls simply has no utilisation sample.
func (n *NVML) Processes() ([]GPUProcess, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("%w: sampled after Close", ErrNVML)
	}
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: device count: %v", ErrNVML, ret)
	}
	if n.lastSeen == nil {
		n.lastSeen = map[string]uint64{}
	}
	var out []GPUProcess
	for i := 0; i < count; i++ {
		dev, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("%w: GPU %d: %v", ErrNVML, i, ret)
		}
		uuid, ret := dev.GetUUID()
		if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
			return nil, fmt.Errorf("%w: GPU %d: uuid: %v", ErrNVML, i, ret)
		}
		procs, ret := dev.GetComputeRunningProcesses()
		switch ret {
		case nvml.SUCCESS:
		case nvml.ERROR_NOT_SUPPORTED:
			continue
		default:
			return nil, fmt.Errorf("%w: GPU %d: running processes: %v", ErrNVML, i, ret)
		}
		util, known := n.processUtil(i, uuid, dev)
		total := 0.0
		if len(procs) > 0 {
			// Unknown (0) when the driver cannot tell: the processes'
			// own figures are still worth reporting.
			if m, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
				total = float64(m.Total) / (1 << 20)
			}
		}
		// A listed process without a sample is not idle for that alone:
		// the driver leaves some out (docs/gpu-check.md: a process busy
		// 25% of the time with none, MPS clients, whose time the server's
		// pid carries). Its utilisation is 0 only when the GPU itself was
		// idle; else it is unknown, never read as 0%.
		gpuIdle, askedIdle := false, false
		for _, p := range procs {
			g := GPUProcess{GPU: i, UUID: uuid, PID: int(p.Pid), MemTotalMB: total}
			if p.UsedGpuMemory != notAvailable {
				g.MemUsedMB = float64(p.UsedGpuMemory) / (1 << 20)
			}
			if v, sampled := util[p.Pid]; known && sampled {
				g.UtilPct, g.UtilKnown = v, true
			} else if known {
				if !askedIdle {
					u, ret := dev.GetUtilizationRates()
					gpuIdle, askedIdle = ret == nvml.SUCCESS && u.Gpu == 0, true
				}
				g.UtilKnown = gpuIdle
			}
			out = append(out, g)
		}
	}
	return out, nil
}

// processUtil is the mean SM utilisation of each process over the samples
// of GPU i newer than the last one seen, and whether the GPU reports it at
// all. ERROR_NOT_FOUND means no sample is newer: no process has one (the
// caller asks the GPU whether it was idle).
func (n *NVML) processUtil(i int, uuid string, dev nvml.Device) (map[uint32]float64, bool) {
	key := fmt.Sprintf("%d/%s", i, uuid)
	samples, ret := dev.GetProcessUtilization(n.lastSeen[key])
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_FOUND:
		return nil, true
	default:
		// NOT_SUPPORTED (older boards, vGPU) or a transient failure: the
		// processes' memory is still worth reporting.
		return nil, false
	}
	sum := map[uint32]float64{}
	num := map[uint32]int{}
	last := n.lastSeen[key]
	for _, s := range samples {
		if s.TimeStamp <= n.lastSeen[key] {
			continue
		}
		sum[s.Pid] += float64(min(s.SmUtil, 100))
		num[s.Pid]++
		last = max(last, s.TimeStamp)
	}
	n.lastSeen[key] = last
	for pid := range sum {
		sum[pid] /= float64(num[pid])
	}
	return sum, true
}
