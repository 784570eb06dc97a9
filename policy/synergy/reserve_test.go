package synergy

import (
	"fmt"
	"strings"
	"testing"
)

func reserveCfg(cpus int, memMB int64) Config {
	c := DefaultConfig()
	c.CPUReservePerNode, c.MemReservePerNodeMB = cpus, memMB
	return c
}

const reserveNote = "per node for jobs without GPUs"

// The reserve is taken off every node before Synergy sizes a GPU job, and
// the admin comment says so exactly when it changed the sizing.
func TestReserve(t *testing.T) {
	small := []Node{{CPUs: 4, MemMB: 16000, Gres: "gpu:4"}}
	slack := []Node{{CPUs: 10, MemMB: 40000, Gres: "gpu:4"}}
	roomy := []Node{{CPUs: 10, MemMB: 400000, Gres: "gpu:4"}}
	cases := []struct {
		name     string
		cfg      Config
		nodes    []Node
		req      Request
		cpus     int
		memMB    uint64
		profiled bool
		noted    bool
	}{
		{"no reserve gives the whole node's share and no note", cfg(), synergyNodes, gpuJob("mystery", "1"), 3, 64000, false, false},
		{"a reserve lowers the proportional share and the comment says why", reserveCfg(2, 8000), synergyNodes, gpuJob("mystery", "1"), 2, 63000, false, true},
		{"a memory-only reserve lowers only the memory share", reserveCfg(0, 8000), synergyNodes, gpuJob("mystery", "1"), 3, 63000, false, true},
		{"a reserve inside the rounding slack changes nothing and is not noted", reserveCfg(2, 0), slack, gpuJob("mystery", "1"), 2, 10000, false, false},
		{"a best case that fits beside the reserve is kept without a note", reserveCfg(2, 8000), synergyNodes, gpuJob("res18", "1"), 9, 64000, true, false},
		{"a best case that only fits into the reserve falls back to the share, noted", reserveCfg(8, 0), synergyNodes, gpuJob("res18", "2"), 2, 64000, false, true},
		{"a best case refused only because of the reserve is noted though the share is the same", reserveCfg(2, 0), roomy, gpuJob("res18", "1"), 2, 100000, false, true},
		{"a best case that fits no whole node either is not blamed on the reserve", reserveCfg(2, 0), roomy, gpuJob("greedy", "1"), 2, 100000, false, false},
		{"a reserve larger than the node leaves each GPU 1 CPU and half the memory", reserveCfg(64, 1<<30), small, gpuJob("mystery", "1"), 1, 2000, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.cfg, c.req, c.nodes, lookup)
			if d.Action != Set || d.CPUsPerGPU != c.cpus || d.MemMBPerGPU != c.memMB || d.Profiled != c.profiled {
				t.Fatalf("got %+v; want %d CPUs, %d MB, profiled %v", d, c.cpus, c.memMB, c.profiled)
			}
			if noted := strings.Contains(d.Reason, reserveNote); noted != c.noted {
				t.Fatalf("reason %q: reserve noted = %v, want %v", d.Reason, noted, c.noted)
			}
			if c.noted {
				want := fmt.Sprintf("after keeping %d CPUs, %d MB", c.cfg.CPUReservePerNode, c.cfg.MemReservePerNodeMB)
				if !strings.Contains(d.Reason, want) || !strings.Contains(d.Reason, "[lachesis:sized") {
					t.Fatalf("reason %q lacks %q or the sizing marker", d.Reason, want)
				}
			}
		})
	}
}

// The reserve's promise: GPU jobs at the proportional share on every GPU
// of a node leave at least the reserve free for jobs without GPUs, on any
// node big enough to keep it (1 CPU per GPU, half its memory to GPU jobs).
func TestJobsAtTheShareOnEveryGPULeaveTheReserveFree(t *testing.T) {
	for _, shape := range []struct{ cpus, gpus int }{{8, 4}, {24, 8}, {10, 4}, {64, 8}, {2, 2}, {96, 8}, {7, 3}} {
		for _, res := range []int{0, 1, 2, 5} {
			mem := uint64(shape.cpus) * 4000
			memRes := int64(res) * 1000
			node := Node{CPUs: shape.cpus, MemMB: mem, Gres: fmt.Sprintf("gpu:%d", shape.gpus)}
			d := Decide(reserveCfg(res, memRes), gpuJob("mystery", "1"), []Node{node}, lookup)
			if d.Action != Set {
				t.Fatalf("%+v reserve %d: not sized: %+v", shape, res, d)
			}
			keepCPUs := min(res, shape.cpus-shape.gpus)
			if used := shape.gpus * d.CPUsPerGPU; used > shape.cpus-keepCPUs {
				t.Errorf("%d CPUs/%d GPUs, reserve %d: %d jobs at %d CPUs use %d, leaving less than %d",
					shape.cpus, shape.gpus, res, shape.gpus, d.CPUsPerGPU, used, keepCPUs)
			}
			keepMem := min(uint64(memRes), mem/2)
			if used := uint64(shape.gpus) * d.MemMBPerGPU; used > mem-keepMem {
				t.Errorf("%d MB/%d GPUs, reserve %d MB: jobs use %d MB, leaving less than %d",
					mem, shape.gpus, memRes, used, keepMem)
			}
		}
	}
}
