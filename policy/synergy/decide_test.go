package synergy

import (
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Nodes of 8 GPUs, 24 CPUs, 500 GB: the Synergy paper's servers, so the
// proportional share is 3 CPUs and 62.5 GB per GPU.
var synergyNodes = []Node{{CPUs: 24, MemMB: 512000, Gres: "gpu:8"}, {CPUs: 24, MemMB: 512000, Gres: "gpu:v100:8"}}

var profiles = map[string]sensitivity.Demand{
	"res18":  {CPUsPerGPU: 9, MemGBPerGPU: 62.5},
	"gnmt":   {CPUsPerGPU: 1, MemGBPerGPU: 20},
	"greedy": {CPUsPerGPU: 30, MemGBPerGPU: 10},
}

func lookup(m string, _ uint32) (sensitivity.Demand, bool) { d, ok := profiles[m]; return d, ok }

func cfg() Config { return DefaultConfig() }

func gpuJob(name string, gpus string) Request {
	return Request{Name: name, Partition: "gpu", GPU: gres.Request{PerJob: "gres:gpu:" + gpus, Nodes: 1}}
}

func TestDecide(t *testing.T) {
	over := cfg()
	over.Override = true
	cases := []struct {
		name     string
		cfg      Config
		req      Request
		action   Action
		cpus     int
		memMB    uint64
		profiled bool
	}{
		{"image model gets its best case above the share", cfg(), gpuJob("res18", "1"), Set, 9, 64000, true},
		{"language model gets its best case below the share", cfg(), gpuJob("gnmt", "2"), Set, 1, 20480, true},
		{"model key from comment beats job name", cfg(), func() Request {
			r := gpuJob("train.sh", "1")
			r.Comment = "team=x model=gnmt"
			return r
		}(), Set, 1, 20480, true},
		{"unknown model gets the proportional share", cfg(), gpuJob("mystery", "1"), Set, 3, 64000, false},
		{"best case that fits no node falls back to the share", cfg(), gpuJob("greedy", "1"), Set, 3, 64000, false},
		{"job without GPUs is left alone", cfg(), Request{Name: "res18"}, Leave, 0, 0, false},
		{"explicit cpus-per-gpu is kept by default", cfg(), func() Request {
			r := gpuJob("res18", "1")
			r.CPUsPerTRES = "gres:gpu:2"
			return r
		}(), Set, 0, 64000, true},
		{"explicit cpus-per-gpu is replaced with override", over, func() Request {
			r := gpuJob("res18", "1")
			r.CPUsPerTRES = "gres:gpu:2"
			return r
		}(), Set, 9, 64000, true},
		{"explicit cpus and mem are both kept by default", cfg(), func() Request {
			r := gpuJob("res18", "1")
			r.CPUsPerTRES, r.MemMB = "gres:gpu:2", 1000
			return r
		}(), Leave, 0, 0, false},
		{"malformed gres is rejected", cfg(), Request{Name: "x", GPU: gres.Request{PerJob: "gres:gpu:lots:of:them"}}, Reject, 0, 0, false},
		{"mem-per-gpu with mem is rejected", cfg(), func() Request {
			r := gpuJob("res18", "1")
			r.MemPerTRES, r.MemMB = "gres:gpu:100", 100
			return r
		}(), Reject, 0, 0, false},
		{"zero cpus-per-gpu is rejected", cfg(), func() Request {
			r := gpuJob("res18", "1")
			r.CPUsPerTRES = "gres:gpu:0"
			return r
		}(), Reject, 0, 0, false},
		{"disabled synergy leaves jobs alone", Config{}, gpuJob("res18", "1"), Leave, 0, 0, false},
		{"more GPUs per node than any node has is left alone", cfg(), Request{Name: "res18", GPU: gres.Request{PerNode: "gres:gpu:16", Nodes: 1}}, Leave, 0, 0, false},
		{"per-node request sizes per GPU, not per job", cfg(), Request{Name: "res18", GPU: gres.Request{PerNode: "gres:gpu:2", Nodes: 4}}, Set, 9, 64000, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.cfg, c.req, synergyNodes, lookup)
			if d.Action != c.action || d.CPUsPerGPU != c.cpus || d.MemMBPerGPU != c.memMB || d.Profiled != c.profiled {
				t.Fatalf("got %+v; want action %d, %d CPUs, %d MB, profiled %v", d, c.action, c.cpus, c.memMB, c.profiled)
			}
			if d.Action == Reject && d.Error == "" {
				t.Fatal("reject without a message")
			}
			if d.Action == Set && !strings.Contains(d.Reason, "model="+d.ModelKey) {
				t.Fatalf("reason %q does not name the model", d.Reason)
			}
		})
	}
}

func TestProportionalShareComesFromTheSmallestNode(t *testing.T) {
	nodes := []Node{{CPUs: 64, MemMB: 1 << 20, Gres: "gpu:4"}, {CPUs: 16, MemMB: 256000, Gres: "gpu:4"}, {CPUs: 128, MemMB: 1 << 20, Gres: ""}}
	d := Decide(cfg(), gpuJob("mystery", "1"), nodes, lookup)
	if d.CPUsPerGPU != 4 || d.MemMBPerGPU != 64000 {
		t.Fatalf("got %d CPUs, %d MB; want 4 CPUs, 64000 MB (16 CPUs, 256000 MB over 4 GPUs)", d.CPUsPerGPU, d.MemMBPerGPU)
	}
}

// Nodes whose gres string carries slurmctld's socket suffix are sized as
// the same nodes without it.
func TestProportionalShareReadsNodesWithSocketSuffixes(t *testing.T) {
	nodes := []Node{{CPUs: 16, MemMB: 256000, Gres: "gpu:a100:4(S:0-1),shard:16(S:0,1)"}, {CPUs: 64, MemMB: 1 << 20, Gres: "gpu:4(S:0)"}}
	d := Decide(cfg(), gpuJob("mystery", "4"), nodes, lookup)
	if d.Action != Set || d.CPUsPerGPU != 4 || d.MemMBPerGPU != 64000 {
		t.Fatalf("got %+v; want 4 CPUs, 64000 MB per GPU (16 CPUs, 256000 MB over 4 GPUs)", d)
	}
}

func TestModelKeyIsBounded(t *testing.T) {
	r := Request{Name: strings.Repeat("n", 1000), Comment: strings.Repeat("x ", 100000) + "model=late"}
	if k := r.ModelKey(); len(k) != maxModelKey || strings.Contains(k, "late") {
		t.Fatalf("key of %d bytes %q...; want the name cut to %d, the comment scanned only at its start", len(k), k[:10], maxModelKey)
	}
}

func FuzzDecide(f *testing.F) {
	f.Add("gres:gpu:2", "", "gres:gpu:3", "gres:gpu:10G", "model=res18", uint16(0), uint64(0))
	f.Add("gres/gpu:a100=4", "gres:gpu:1", "", "", "", uint16(2), uint64(1000))
	f.Add(":::", ",,", "gres:gpu:-1", "gres:gpu:99999999999999", "model=", uint16(65535), uint64(1<<63))
	f.Fuzz(func(t *testing.T, perJob, perNode, cpus, mem, comment string, cpt uint16, memMB uint64) {
		req := Request{Name: "job", Comment: comment, CPUsPerTRES: cpus, MemPerTRES: mem, CPUsPerTask: cpt, MemMB: memMB,
			GPU: gres.Request{PerJob: perJob, PerNode: perNode, Nodes: 1}}
		d := Decide(cfg(), req, synergyNodes, lookup)
		switch d.Action {
		case Reject:
			if d.Error == "" {
				t.Fatal("reject without a message")
			}
		case Set:
			if d.CPUsPerGPU > 24 || d.MemMBPerGPU > 512000 {
				t.Fatalf("sized beyond any node: %+v", d)
			}
		}
	})
}

// The lookup is asked for the job's own user's profile: one user's profile
// of a model is not another's (issue 20 item 2).
func TestDecideLooksUpTheJobsOwnUser(t *testing.T) {
	owned := func(m string, uid uint32) (sensitivity.Demand, bool) {
		if uid == 1001 {
			return profiles[m], true
		}
		return sensitivity.Demand{}, false
	}
	req := gpuJob("res18", "1")
	req.UserID = 1002
	if d := Decide(cfg(), req, synergyNodes, owned); !d.NoProfile {
		t.Fatalf("user 1002's job sized by user 1001's profile: %+v", d)
	}
	req.UserID = 1001
	if d := Decide(cfg(), req, synergyNodes, owned); d.NoProfile {
		t.Fatalf("user 1001's job not sized by their own profile: %+v", d)
	}
}
