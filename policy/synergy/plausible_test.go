package synergy

import (
	"math"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// A profile that got past ingest (stored earlier, or from another path)
// must still never size a job: every absurd best case gives the
// proportional share (3 CPUs, 64000 MB on synergyNodes).
func TestAbsurdBestCaseGivesTheProportionalShare(t *testing.T) {
	cases := []struct {
		name string
		best sensitivity.Demand
	}{
		{"1e-9 GB per GPU", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1e-9}},
		{"1e300 GB per GPU", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1e300}},
		{"NaN GB per GPU", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: math.NaN()}},
		{"infinite GB per GPU", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: math.Inf(1)}},
		{"negative GB per GPU", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: -1}},
		{"negative CPUs per GPU", sensitivity.Demand{CPUsPerGPU: -8, MemGBPerGPU: 4}},
		// 2^62 CPUs times 4 GPUs wraps to 0 in int: it must not "fit".
		{"CPUs that overflow the per-node product", sensitivity.Demand{CPUsPerGPU: 1 << 62, MemGBPerGPU: 4}},
	}
	for _, c := range cases {
		t.Run(c.name+" gives the proportional share", func(t *testing.T) {
			look := func(string, uint32) (sensitivity.Demand, bool) { return c.best, true }
			req := Request{Name: "evil", GPU: gres.Request{PerNode: "gres:gpu:4", Nodes: 1}}
			d := Decide(cfg(), req, synergyNodes, look)
			if d.Action != Set || d.CPUsPerGPU != 3 || d.MemMBPerGPU != 64000 || d.Profiled {
				t.Fatalf("got %+v; want the share, 3 CPUs and 64000 MB, not profiled", d)
			}
			if len(d.Reason) > 511 || !strings.Contains(d.Reason, "[lachesis:sized cpus=3 mem=64000 share_cpus=3 share_mem=64000]") {
				t.Fatalf("reason of %d bytes without a whole marker: %q", len(d.Reason), d.Reason)
			}
		})
	}
}

func TestReasonIsBoundedAndKeepsItsMarker(t *testing.T) {
	cases := []struct {
		name string
		req  Request
	}{
		{"a huge model key is clipped", Request{Comment: "model=" + strings.Repeat("m", 5000), GPU: gres.Request{PerJob: "gres:gpu:1", Nodes: 1}}},
		{"a huge partition name is clipped", Request{Name: "x", Partition: strings.Repeat("p", 5000), GPU: gres.Request{PerNode: "gres:gpu:16", Nodes: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(cfg(), c.req, synergyNodes, lookup)
			if len(d.Reason) > MaxReasonText+100 {
				t.Fatalf("reason of %d bytes", len(d.Reason))
			}
			if d.Action == Set {
				if _, ok := ParseSizing(d.Reason); !ok {
					t.Fatalf("marker lost: %q", d.Reason)
				}
			}
		})
	}
}

func TestJobOfMoreGPUsThanANodeIsSizedForTheSpread(t *testing.T) {
	two := []Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:2"}, {CPUs: 8, MemMB: 16000, Gres: "gpu:2"}}
	cases := []struct {
		name   string
		req    Request
		action Action
	}{
		{"--gpus=3 without -N is sized per GPU of a 2-GPU node", Request{Name: "m", Partition: "gpu", GPU: gres.Request{PerJob: "gres:gpu:3"}}, Set},
		{"--gpus=3 with -N1 cannot fit and is left alone", Request{Name: "m", Partition: "gpu", GPU: gres.Request{PerJob: "gres:gpu:3", Nodes: 1}}, Leave},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(cfg(), c.req, two, lookup)
			if d.Action != c.action {
				t.Fatalf("got %+v; want action %d", d, c.action)
			}
			if c.action == Set && (d.CPUsPerGPU != 4 || d.MemMBPerGPU != 8000 || !strings.Contains(d.Reason, "spread")) {
				t.Fatalf("got %+v; want the share of a 2-GPU node (4 CPUs, 8000 MB), reason saying spread", d)
			}
			if c.action == Leave && !strings.Contains(d.Reason, `partition "gpu"`) {
				t.Fatalf("reason %q does not name the partition", d.Reason)
			}
		})
	}
}
