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
	// One GPU free with 6 CPUs: no other free GPU keeps a share, so the
	// job gets all 6, between its share (3) and its best case (9).
	lastGPU := busy
	lastGPU.AllocGPUs = 7
	cases := []struct {
		name     string
		comment  string
		held     time.Duration
		nodes    []NodeState
		shrink   bool
		wantCPUs int
	}{
		{"enlarged job with free GPUs but no CPUs is lowered to the share the other free GPU leaves", enlarged, time.Hour, []NodeState{busy}, true, 3},
		{"enlarged job gets what the node spares when no other GPU is free", enlarged, time.Hour, []NodeState{lastGPU}, true, 6},
		{"the node that spares most is chosen", enlarged, time.Hour, []NodeState{busy, lastGPU}, true, 6},
		{"job held back for less than fallback_after waits for its best case", enlarged, DefaultFallbackAfter - time.Second, []NodeState{busy}, false, 0},
		{"job held back for fallback_after is lowered", enlarged, DefaultFallbackAfter, []NodeState{lastGPU}, true, 6},
		{"job whose GPUs are not free anywhere is kept", enlarged, time.Hour, []NodeState{gpusTaken}, false, 0},
		{"job that fits as it is is kept", enlarged, time.Hour, []NodeState{roomy}, false, 0},
		{"job that fits as it is on one node is kept", enlarged, time.Hour, []NodeState{busy, roomy}, false, 0},
		{"down node does not count", enlarged, time.Hour, []NodeState{down}, false, 0},
		{"job below its share is never shrunk", small, time.Hour, []NodeState{busy}, false, 0},
		{"job Lachesis did not size is kept", "user notes", time.Hour, []NodeState{busy}, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, holding, ok := Fallback(cfg(), c.comment, 1, c.held, c.nodes)
			if ok != c.shrink {
				t.Fatalf("shrink = %v (%+v), want %v", ok, s, c.shrink)
			}
			// Held back: GPUs free on some node, the request on none.
			wantHolding := c.shrink || strings.HasPrefix(c.name, "job held back")
			if holding != wantHolding {
				t.Fatalf("holding = %v, want %v", holding, wantHolding)
			}
			if !ok {
				return
			}
			if s.CPUsPerGPU != c.wantCPUs || s.MemMBPerGPU != 64000 {
				t.Fatalf("lowered to %d CPUs, %d MB; want %d, 64000", s.CPUsPerGPU, s.MemMBPerGPU, c.wantCPUs)
			}
			if !strings.Contains(s.AdminComment, "resized to start now") || !strings.HasPrefix(s.AdminComment, enlarged[:strings.Index(enlarged, SizedMarker)]) {
				t.Fatalf("comment %q must keep the reason and say why", s.AdminComment)
			}
			sz, ok := ParseSizing(s.AdminComment)
			if !ok || sz != (Sizing{CPUs: c.wantCPUs, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}) {
				t.Fatalf("marker after the resize = %+v, %v; want the lowered request and the share", sz, ok)
			}
			if !strings.Contains(s.AdminComment, "held back with GPUs free") {
				t.Fatalf("comment %q does not say how long the job was held back", s.AdminComment)
			}
			if _, _, again := Fallback(cfg(), s.AdminComment, 1, c.held, c.nodes); again {
				t.Fatal("a job lowered to what fits was lowered again on the same nodes")
			}
		})
	}
}

// Issue 20.4: a job named like a sizing marker must not put one into its
// admin comment, and the fallback reads only Lachesis's own, trailing one.
func TestForgedMarkerInANameNeverDrivesTheFallback(t *testing.T) {
	forged := "[lachesis:sized cpus=99 mem=9 share_cpus=48 share_mem=9]"
	for _, req := range []Request{
		gpuJob(forged, "1"),
		{Name: "x", Comment: "model=" + forged, Partition: "gpu", GPU: gpuJob("", "1").GPU},
		{Name: "x", Partition: "gpu]" + forged, GPU: gpuJob("", "1").GPU},
		gpuJob("a\n"+forged+"\x1b[0m", "1"),
	} {
		d := Decide(cfg(), req, synergyNodes, lookup)
		if n := strings.Count(d.Reason, "[lachesis:"); n != 1 {
			t.Fatalf("reason %q carries %d markers; want only Lachesis's", d.Reason, n)
		}
		if strings.ContainsAny(d.Reason, "\n\x1b") {
			t.Fatalf("reason %q carries control characters", d.Reason)
		}
		sz, ok := ParseSizing(d.Reason)
		if !ok || sz.CPUs != 3 || sz.ShareCPUs != 3 {
			t.Fatalf("ParseSizing(%q) = %+v, %v; want the share Lachesis gave (3 CPUs)", d.Reason, sz, ok)
		}
		if _, _, shrink := Fallback(cfg(), d.Reason, 1, time.Hour, []NodeState{{CPUs: 64, GPUs: 8, MemMB: 512000, AllocMemMB: 500000, Usable: true}}); shrink {
			t.Fatalf("a job Lachesis did not enlarge was resized from %q", d.Reason)
		}
	}
}

func TestParseSizingReadsOnlyTheTrailingMarker(t *testing.T) {
	real := Sizing{CPUs: 9, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 64000}.marker()
	forged := Sizing{CPUs: 99, MemMB: 9, ShareCPUs: 48, ShareMemMB: 9}.marker()
	cases := []struct {
		comment string
		ok      bool
	}{
		{"lachesis: model=x " + real, true},
		{"lachesis: model=x " + real + "; lachesis placement: model=x: prefers f_a", true},
		{"an admin's " + forged + " note; lachesis: model=x " + real, true},
		{"lachesis: model=x " + real + " trailing words", false},
		{"lachesis: model=x " + real + "; " + "[lachesis:shrunk]; lachesis: shrunk", false},
		{"lachesis: model=x " + real + "; [lachesis:sized cpus=1", false},
	}
	for _, c := range cases {
		sz, ok := ParseSizing(c.comment)
		if ok != c.ok || (ok && sz.CPUs != 9) {
			t.Errorf("ParseSizing(%q) = %+v, %v; want ok=%v with 9 CPUs", c.comment, sz, ok, c.ok)
		}
	}
}

// A marker whose share exceeds its sizing in one dimension shrinks only the
// other: the fallback never asks for more than the sizing in either.
func TestFallbackNeverRaisesEitherDimension(t *testing.T) {
	comment := "lachesis: model=x " + Sizing{CPUs: 9, MemMB: 1000, ShareCPUs: 3, ShareMemMB: 64000}.marker()
	node := NodeState{CPUs: 24, AllocCPUs: 18, GPUs: 8, MemMB: 512000, Usable: true}
	s, _, ok := Fallback(cfg(), comment, 1, time.Hour, []NodeState{node})
	if !ok || s.CPUsPerGPU != 3 || s.MemMBPerGPU != 1000 {
		t.Fatalf("Fallback = %+v, %v; want 3 CPUs and the sized 1000 MB", s, ok)
	}
	if got, ok := ParseSizing(s.AdminComment); strings.Count(s.AdminComment, "[lachesis:") != 1 || !ok ||
		got.CPUs != 3 || got.MemMB != 1000 {
		t.Fatalf("comment after the shrink: %q (want one marker, of the lowered request)", s.AdminComment)
	}
}
