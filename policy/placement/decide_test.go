package placement

import (
	"errors"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
	"github.com/lachesis-sched/lachesis/policy/gres"
)

// Two node groups of 2 GPUs each: type a on lnode1-2, type b on lnode3-4.
var twoTypes = []TypedNode{
	{CPUs: 8, MemMB: 16000, Gres: "gpu:a:2", Features: "gpu_a"},
	{CPUs: 8, MemMB: 16000, Gres: "gpu:a:2", Features: "gpu_a"},
	{CPUs: 8, MemMB: 16000, Gres: "gpu:b:2", Features: "gpu_b,ib"},
	{CPUs: 8, MemMB: 16000, Gres: "gpu:b:2", Features: "gpu_b,ib"},
}

func table() Config {
	c := DefaultConfig()
	c.Enabled = true
	c.Models = map[string]Model{
		"fast_on_a": {Speed: map[string]float64{"a": 3, "b": 1}, SpreadRatio: 0.4},
		"mild_on_a": {Speed: map[string]float64{"a": 1.5, "b": 1}, SpreadRatio: 0.95},
		"even":      {Speed: map[string]float64{"a": 2.1, "b": 1}},
		"k80only":   {Speed: map[string]float64{"k80": 1}},
	}
	return c
}

func job(model string, gpus string) Job {
	return Job{Name: model, Partition: "gpu", GPU: gres.Request{PerJob: "gres:gpu:" + gpus}}
}

func TestDecide(t *testing.T) {
	off := table()
	off.Enabled = false
	solo := table()
	solo.Models = map[string]Model{"fast_on_a": table().Models["fast_on_a"]}
	with := func(r Job, f func(*Job)) Job { f(&r); return r }
	// Profiles measured on both types override the table's row (even:
	// 2.1 in the table, 6 measured) and add a model the table lacks.
	profiled := table()
	profiled.Profiled = map[string]map[string]float64{
		"even":      {"a": 600, "b": 100},
		"unlisted":  {"a": 100, "b": 400},
		"fast_on_a": {"b": 1000}, // one type: the table row stays
	}
	cases := []struct {
		name     string
		cfg      Config
		req      Job
		nodes    []TypedNode
		prefer   string
		maxNodes uint32
		reason   string // substring; "" = no reason at all
	}{
		{"model much faster on a prefers a", table(), job("fast_on_a", "1"), twoTypes, "gpu_a", 0, "prefers gpu_a"},
		{"model faster on a but less so than others prefers b", table(), job("mild_on_a", "1"), twoTypes, "gpu_b", 0, "prefers gpu_b"},
		{"model with the table's average ratio gets no preference", table(), job("even", "1"), twoTypes, "", 0, "no GPU type gives"},
		{"only model of the table is steered by absolute advantage", solo, job("fast_on_a", "1"), twoTypes, "gpu_a", 0, "vs 0 other"},
		{"model key from the comment is used", table(), with(job("train.sh", "1"), func(r *Job) { r.Comment = "model=FAST_ON_A" }), twoTypes, "gpu_a", 0, "model=fast_on_a"},
		{"unknown model is left alone silently", table(), job("mystery", "1"), twoTypes, "", 0, ""},
		{"disabled placement leaves every job alone", off, job("fast_on_a", "4"), twoTypes, "", 0, ""},
		{"user's constraint is kept", table(), with(job("fast_on_a", "1"), func(r *Job) { r.Features = "ib" }), twoTypes, "", 0, "kept the user's"},
		{"user's prefer is kept", table(), with(job("fast_on_a", "1"), func(r *Job) { r.Prefer = "gpu_b" }), twoTypes, "", 0, "kept the user's"},
		{"user's node list is kept", table(), with(job("fast_on_a", "1"), func(r *Job) { r.ReqNodes = "lnode3" }), twoTypes, "", 0, "kept the user's"},
		{"typed GPU request is kept", table(), job("fast_on_a", "b:1"), twoTypes, "", 0, "kept the user's GPU type"},
		{"typed per-node GPU request is kept", table(), Job{Name: "fast_on_a", GPU: gres.Request{PerNode: "gres/gpu:b=1"}}, twoTypes, "", 0, "GPU type"},
		{"type without a node feature here gets no preference", table(), job("fast_on_a", "1"),
			[]TypedNode{{CPUs: 8, MemMB: 16000, Gres: "gpu:2", Features: "gpu_a"}, {CPUs: 8, MemMB: 16000, Gres: "gpu:2"}}, "", 0, ""},
		{"type whose nodes cannot hold the job is not preferred", table(), with(job("fast_on_a", "1"), func(r *Job) { r.CPUsPerTRES = "gres:gpu:6" }),
			[]TypedNode{{CPUs: 4, MemMB: 16000, Gres: "gpu:a:2", Features: "gpu_a"}, {CPUs: 8, MemMB: 16000, Gres: "gpu:b:2", Features: "gpu_b"}}, "", 0, "cannot hold"},
		{"sensitive 4-GPU job on nodes of 2 gets at most 2 nodes", table(), job("fast_on_a", "4"), twoTypes, "gpu_a", 2, "at most 2 node(s)"},
		{"insensitive 4-GPU job is free to spread", table(), job("mild_on_a", "4"), twoTypes, "gpu_b", 0, "free to spread"},
		{"model of unknown sensitivity is not capped", table(), job("even", "4"), twoTypes, "", 0, "no GPU type"},
		{"sensitive job with a node count is not capped", table(), with(job("fast_on_a", "4"), func(r *Job) { r.GPU.Nodes = 2 }), twoTypes, "gpu_a", 0, "prefers"},
		{"job needing more nodes than type a has gets no preference", table(), with(job("fast_on_a", "4"), func(r *Job) { r.GPU.Nodes = 4 }), twoTypes, "", 0, "cannot hold"},
		{"sensitive job with a node cap keeps it", table(), with(job("fast_on_a", "4"), func(r *Job) { r.MaxNodes = 3 }), twoTypes, "gpu_a", 0, "prefers"},
		{"cap counts the GPUs CPUs let a node hold", table(), with(job("fast_on_a", "4"), func(r *Job) { r.CPUsPerTRES = "gres:gpu:8" }), twoTypes, "", 4, "at most 4 node(s) of up to 1"},
		{"nodes whose gres carries sockets are sized the same", table(), job("fast_on_a", "4"), []TypedNode{
			{CPUs: 8, MemMB: 16000, Gres: "gpu:a:2(S:0-1)", Features: "gpu_a"}, {CPUs: 8, MemMB: 16000, Gres: "gpu:a:2(S:0,1)", Features: "gpu_a"},
			{CPUs: 8, MemMB: 16000, Gres: "gpu:b:2(S:0)", Features: "gpu_b"}, {CPUs: 8, MemMB: 16000, Gres: "gpu:b:2(S:1)", Features: "gpu_b"}}, "gpu_a", 2, "at most 2 node(s)"},
		{"single-GPU sensitive job is not capped", table(), job("fast_on_a", "1"), twoTypes, "gpu_a", 0, "prefers"},
		{"model profiled on both types follows its profiles over the table", profiled, job("even", "1"), twoTypes, "gpu_a", 0, "speeds from its profiles"},
		{"model profiled on both types but not in the table is steered", profiled, job("unlisted", "1"), twoTypes, "gpu_b", 0, "speeds from its profiles"},
		{"model profiled on one type keeps the table's row", profiled, job("fast_on_a", "1"), twoTypes, "gpu_a", 0, "prefers gpu_a by"},
		{"profiled model keeps the table's spread sensitivity", profiled, job("even", "4"), twoTypes, "gpu_a", 0, "prefers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Place(tc.cfg, tc.req, tc.nodes)
			if d.Prefer != tc.prefer || d.MaxNodes != tc.maxNodes {
				t.Fatalf("prefer %q max_nodes %d, want %q %d (reason %q)", d.Prefer, d.MaxNodes, tc.prefer, tc.maxNodes, d.Reason)
			}
			if tc.reason == "" && d.Reason != "" || !strings.Contains(d.Reason, tc.reason) {
				t.Fatalf("reason %q, want it to contain %q", d.Reason, tc.reason)
			}
			if len(d.Reason) > MaxReason {
				t.Fatalf("reason is %d bytes, over %d", len(d.Reason), MaxReason)
			}
		})
	}
}

func TestReasonStaysBoundedForHugeNames(t *testing.T) {
	c := table()
	long := strings.Repeat("m", 128)
	c.Models[long] = Model{Speed: map[string]float64{"a": 9, "b": 1}, SpreadRatio: 0.1}
	d := Place(c, job(long, "4"), twoTypes)
	if d.Prefer != "gpu_a" || len(d.Reason) > MaxReason {
		t.Fatalf("prefer %q, reason of %d bytes", d.Prefer, len(d.Reason))
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Config)
		key  string
	}{
		{"zero speed is refused", func(c *Config) { c.Models["x"] = Model{Speed: map[string]float64{"a": 0}} }, "models.x.speed.a"},
		{"type name with an operator is refused", func(c *Config) { c.Models["x"] = Model{Speed: map[string]float64{"a|b": 1}} }, "models.x.speed.a|b"},
		{"spread ratio above one is refused", func(c *Config) { c.Models["x"] = Model{Speed: map[string]float64{"a": 1}, SpreadRatio: 1.5} }, "models.x.spread_ratio"},
		{"advantage below one is refused", func(c *Config) { c.MinAdvantage = 0.5 }, "min_advantage"},
		{"sensitivity above one is refused", func(c *Config) { c.SensitiveBelow = 2 }, "sensitive_below"},
		{"feature prefix with a comma is refused", func(c *Config) { c.FeaturePrefix = "gpu," }, "feature_prefix"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := table()
			tc.edit(&c)
			err := c.Validate()
			var ke *configerr.KeyError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("got %v, want an error naming %s", err, tc.key)
			}
		})
	}
	if err := table().Validate(); err != nil {
		t.Fatalf("valid table refused: %v", err)
	}
}

func TestNormalizeLowercasesNames(t *testing.T) {
	c := Config{Models: map[string]Model{"BERT": {Speed: map[string]float64{"V100": 2}}}}.Normalize()
	if c.Models["bert"].Speed["v100"] != 2 {
		t.Fatalf("got %+v", c.Models)
	}
}
