package core

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/placement"
)

func TestPlaceJobFollowsTheConfiguredTable(t *testing.T) {
	nodes := []placement.TypedNode{
		{CPUs: 8, MemMB: 16000, Gres: "gpu:a:2", Features: "gpu_a"},
		{CPUs: 8, MemMB: 16000, Gres: "gpu:b:2", Features: "gpu_b"},
	}
	req := placement.Job{Name: "bert", GPU: gres.Request{PerJob: "gres:gpu:1"}}
	cases := []struct {
		name    string
		enabled bool
		prefer  string
	}{
		{"disabled placement prefers nothing", false, ""},
		{"enabled placement prefers the model's fast type", true, "gpu_a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			store, err := ledger.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			cfg := testConfig(db)
			cfg.Placement.Enabled = tc.enabled
			cfg.Placement.Models = map[string]placement.Model{"bert": {Speed: map[string]float64{"a": 4, "b": 1}}}
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if d := c.PlaceJob(req, nodes); d.Prefer != tc.prefer {
				t.Fatalf("prefer %q, want %q (%s)", d.Prefer, tc.prefer, d.Reason)
			}
		})
	}
}
