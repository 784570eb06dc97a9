package synergy

import (
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

func TestFitOnNode(t *testing.T) {
	// Best case 9 CPUs, 128000 MB per GPU; share 3 CPUs, 64000 MB.
	sz := Sizing{CPUs: 9, MemMB: 128000, ShareCPUs: 3, ShareMemMB: 64000}
	node := func(freeGPUs, freeCPUs int, freeMemMB uint64) NodeState {
		return NodeState{CPUs: 24, AllocCPUs: 24 - freeCPUs, GPUs: 8, AllocGPUs: 8 - freeGPUs,
			MemMB: 512000, AllocMemMB: 512000 - freeMemMB, Usable: true}
	}
	cases := []struct {
		name string
		g    int
		n    NodeState
		cpus int
		mem  uint64
		fit  Fit
	}{
		{"empty node holds the request", 1, node(8, 24, 512000), 9, 128000, FitsAsSized},
		{"last GPU: all the free CPUs, up to the request", 1, node(1, 5, 512000), 5, 128000, FitsLowered},
		{"the other free GPU keeps its share", 1, node(2, 7, 512000), 4, 128000, FitsLowered},
		{"never below the share while it is free", 1, node(3, 4, 512000), 3, 128000, FitsLowered},
		{"memory lowered on its own", 1, node(1, 24, 100000), 9, 100000, FitsLowered},
		{"memory keeps the other GPU's share", 2, node(3, 24, 250000), 9, 93000, FitsLowered},
		{"less than the share free: no fit", 1, node(1, 2, 512000), 0, 0, NoFit},
		{"memory below the share: no fit", 1, node(1, 24, 60000), 0, 0, NoFit},
		{"GPUs taken: no fit", 2, node(1, 24, 512000), 0, 0, NoFit},
		{"over-allocated node: no fit", 1, NodeState{CPUs: 4, AllocCPUs: 9, GPUs: 2, MemMB: 1000, AllocMemMB: 5000, Usable: true}, 0, 0, NoFit},
		{"unusable node: no fit", 1, NodeState{CPUs: 24, GPUs: 8, MemMB: 512000}, 0, 0, NoFit},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cpus, mem, fit := FitOnNode(sz, c.g, c.n)
			if cpus != c.cpus || mem != c.mem || fit != c.fit {
				t.Fatalf("FitOnNode = %d CPUs, %d MB, %v; want %d, %d, %v", cpus, mem, fit, c.cpus, c.mem, c.fit)
			}
		})
	}
}

func TestFitNowOnlyLowersAndNeverBelowTheShare(t *testing.T) {
	sz := Sizing{CPUs: 9, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}
	free := func(gpus, cpus int) NodeState {
		return NodeState{CPUs: 24, AllocCPUs: 24 - cpus, GPUs: 8, AllocGPUs: 8 - gpus, MemMB: 512000, AllocMemMB: 448000, Usable: true}
	}
	if _, ok := FitNow(sz, 1, []NodeState{free(1, 4), free(1, 9)}); ok {
		t.Fatal("lowered a job that fits as sized on a node")
	}
	if _, ok := FitNow(sz, 1, []NodeState{free(0, 24), free(2, 2)}); ok {
		t.Fatal("lowered a job that fits nowhere even at its share")
	}
	rs, ok := FitNow(sz, 1, []NodeState{free(1, 4), free(1, 7), free(2, 8)})
	if !ok || rs.CPUsPerGPU != 7 || rs.MemMBPerGPU != 64000 {
		t.Fatalf("FitNow = %+v, %v; want 7 CPUs (the node that spares most), 64000 MB", rs, ok)
	}
	if rs.Sizing != (Sizing{CPUs: 7, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}) {
		t.Fatalf("new marker %+v must keep the share", rs.Sizing)
	}
	// A marker whose share exceeds its request (a forged or stale one)
	// still never raises the request.
	odd := Sizing{CPUs: 2, MemMB: 1000, ShareCPUs: 20, ShareMemMB: 500000}
	for _, n := range []NodeState{free(1, 24), free(8, 24), free(1, 1)} {
		if cpus, mem, fit := FitOnNode(odd, 1, n); fit != NoFit && (cpus > odd.CPUs || mem > odd.MemMB) {
			t.Fatalf("FitOnNode raised %+v to %d CPUs, %d MB", odd, cpus, mem)
		}
	}
}

func TestRestoreRaisesOnlyFromTheProfileAndTheNodes(t *testing.T) {
	best := sensitivity.Demand{CPUsPerGPU: 9, MemGBPerGPU: 62.5} // 64000 MB
	lowered := Sizing{CPUs: 4, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}
	comment := "lachesis: model=res18 profile best case " + lowered.marker() + "; lachesis: resized to start now: 4 CPUs"
	free := func(gpus, cpus int) NodeState {
		return NodeState{CPUs: 24, AllocCPUs: 24 - cpus, GPUs: 8, AllocGPUs: 8 - gpus, MemMB: 512000, AllocMemMB: 256000, Usable: true}
	}
	sh, ok := Restore(cfg(), comment, best, lowered, 1, []NodeState{free(1, 2), free(8, 24)})
	if !ok || !sh.Raise || sh.CPUsPerGPU != 9 || sh.MemMBPerGPU != 64000 {
		t.Fatalf("Restore = %+v, %v; want a raise to the best case 9 CPUs, 64000 MB", sh, ok)
	}
	if sz, ok := ParseSizing(sh.AdminComment); !ok || sz != (Sizing{CPUs: 9, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}) {
		t.Fatalf("marker after the raise = %+v, %v (comment %q)", sz, ok, sh.AdminComment)
	}
	if !strings.Contains(sh.AdminComment, "raised to start now") {
		t.Fatalf("comment %q does not say why", sh.AdminComment)
	}
	// Only 6 CPUs free with the job's GPU: raised to 6, not to 9.
	if sh, ok := Restore(cfg(), comment, best, lowered, 1, []NodeState{free(1, 6)}); !ok || sh.CPUsPerGPU != 6 {
		t.Fatalf("Restore = %+v, %v; want 6 CPUs", sh, ok)
	}
	// No more free than the job has now: nothing to do.
	if sh, ok := Restore(cfg(), comment, best, lowered, 1, []NodeState{free(1, 4), free(0, 24)}); ok {
		t.Fatalf("Restore = %+v without room for more", sh)
	}
	// A forged marker's share cannot lift the job above its profile: the
	// share is the nodes' (3), whatever the marker says.
	forged := Sizing{CPUs: 1, MemMB: 1000, ShareCPUs: 24, ShareMemMB: 512000}
	fc := "x " + forged.marker()
	sh, ok = Restore(cfg(), fc, best, forged, 1, []NodeState{free(8, 24)})
	if !ok || sh.CPUsPerGPU != 9 || sh.MemMBPerGPU != 64000 {
		t.Fatalf("Restore = %+v, %v; want the profile's 9 CPUs, 64000 MB", sh, ok)
	}
	if sz, _ := ParseSizing(sh.AdminComment); sz.ShareCPUs != 3 || sz.ShareMemMB != 64000 {
		t.Fatalf("the new marker took the forged share: %+v", sz)
	}
	// An implausible profile raises nothing.
	if _, ok := Restore(cfg(), comment, sensitivity.Demand{CPUsPerGPU: 1 << 30, MemGBPerGPU: 1}, lowered, 1, []NodeState{free(8, 24)}); ok {
		t.Fatal("raised from an implausible profile")
	}
}

// Start-time sizing's patience: a job held back by its request waits for
// it up to fallback_after, and only for a request that leaves a CPU for each
// of the node's other GPUs; past either it is lowered now.
func TestWaits(t *testing.T) {
	node := NodeState{CPUs: 24, GPUs: 8, MemMB: 512000, Usable: true}
	sz := func(cpus int, mem uint64) Sizing {
		return Sizing{CPUs: cpus, MemMB: mem, ShareCPUs: 3, ShareMemMB: 64000}
	}
	c := DefaultConfig()
	cases := []struct {
		name string
		sz   Sizing
		g    int
		n    NodeState
		held time.Duration
		want bool
	}{
		{"a request leaving a CPU per other GPU waits", sz(17, 512000), 1, node, 0, true},
		{"it waits until fallback_after", sz(17, 512000), 1, node, DefaultFallbackAfter - time.Second, true},
		{"then it is lowered", sz(17, 512000), 1, node, DefaultFallbackAfter, false},
		{"a request that would strand another GPU is lowered at once", sz(18, 64000), 1, node, 0, false},
		{"more memory than the node has is lowered at once", sz(3, 512001), 1, node, 0, false},
		{"the rule counts all the job's GPUs there", sz(9, 64000), 2, node, 0, true},
		{"two GPUs that would strand the others are lowered at once", sz(10, 64000), 2, node, 0, false},
		{"a node without the job's GPUs does not count", sz(3, 64000), 1, NodeState{CPUs: 24, MemMB: 512000, Usable: true}, 0, false},
		{"a node Slurm cannot use does not count", sz(3, 64000), 1, NodeState{CPUs: 24, GPUs: 8, MemMB: 512000}, 0, false},
	}
	for _, tc := range cases {
		if got := c.Waits(tc.sz, tc.g, tc.n, tc.held); got != tc.want {
			t.Errorf("%s: Waits = %v, want %v", tc.name, got, tc.want)
		}
	}
	c.FallbackAfter = 0
	if c.Waits(sz(3, 64000), 1, node, 0) {
		t.Error("fallback_after 0 waits")
	}
}
