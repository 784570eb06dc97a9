package synergy

import (
	"strings"
	"testing"
	"time"
)

func TestSizedDecisionRecordsAMarkerThatParsesBack(t *testing.T) {
	d := Decide(cfg(), gpuJob("res18", "1"), synergyNodes, lookup)
	sz, ok := ParseSizing(d.Reason)
	if !ok || sz != (Sizing{CPUs: 9, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}) {
		t.Fatalf("ParseSizing(%q) = %+v, %v", d.Reason, sz, ok)
	}
}

func TestFallback(t *testing.T) {
	enlarged := "lachesis: model=res18 profile best case: 9 CPUs, 64000 MB per GPU " + Sizing{CPUs: 9, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}.marker()
	small := "lachesis: model=gnmt " + Sizing{CPUs: 1, MemMB: 20480, ShareCPUs: 3, ShareMemMB: 64000}.marker()
	// A node with 2 of 8 GPUs free and 6 of 24 CPUs free: the share of
	// one GPU (3) fits, the best case (9) does not.
	busy := NodeState{CPUs: 24, AllocCPUs: 18, GPUs: 8, AllocGPUs: 6, MemMB: 512000, AllocMemMB: 100000, Usable: true}
	gpusTaken := busy
	gpusTaken.AllocGPUs = 8
	roomy := busy
	roomy.AllocCPUs = 0
	down := busy
	down.Usable = false
	cases := []struct {
		name    string
		comment string
		waited  time.Duration
		nodes   []NodeState
		shrink  bool
	}{
		{"enlarged job with free GPUs but no CPUs is shrunk", enlarged, 2 * time.Minute, []NodeState{busy}, true},
		{"job that has not waited long enough is kept", enlarged, 10 * time.Second, []NodeState{busy}, false},
		{"job whose GPUs are not free anywhere is kept", enlarged, 2 * time.Minute, []NodeState{gpusTaken}, false},
		{"job that fits as it is is kept", enlarged, 2 * time.Minute, []NodeState{roomy}, false},
		{"down node does not count", enlarged, 2 * time.Minute, []NodeState{down}, false},
		{"job below its share is never shrunk", small, 2 * time.Minute, []NodeState{busy}, false},
		{"job Lachesis did not size is kept", "user notes", 2 * time.Minute, []NodeState{busy}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ok := Fallback(cfg(), c.comment, 1, c.waited, c.nodes)
			if ok != c.shrink {
				t.Fatalf("shrink = %v (%+v), want %v", ok, s, c.shrink)
			}
			if !ok {
				return
			}
			if s.CPUsPerGPU != 3 || s.MemMBPerGPU != 64000 {
				t.Fatalf("shrunk to %d CPUs, %d MB; want the share 3, 64000", s.CPUsPerGPU, s.MemMBPerGPU)
			}
			if strings.Contains(s.AdminComment, SizedMarker) || !strings.Contains(s.AdminComment, "shrunk to the proportional share") {
				t.Fatalf("comment %q must drop the marker and say why", s.AdminComment)
			}
			if _, again := Fallback(cfg(), s.AdminComment, 1, c.waited, c.nodes); again {
				t.Fatal("a shrunk job was shrunk again")
			}
		})
	}
}
