package gpushare

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// Issue 34 item 5: once a user's --gpus=1 job is rewritten into shards,
// the rest of its GPU is room for a guest. Another user's guaranteed job
// asking for those shards itself (--gres=shard:1) would share the GPU as
// a second guaranteed job, which neither introspection nor the memory
// bound judges; it is refused at submit while conversion is on, with a
// message saying what to ask for instead. Shares in the opportunistic
// partition, whole GPUs, and every share while conversion is off, pass.
func TestAGuaranteedJobsOwnShardRequestIsRefusedWhileConversionIsOn(t *testing.T) {
	c := convertCore(t, filepath.Join(t.TempDir(), "l.db"))
	c.cfg.Sharing.OpportunisticPartition = "opp"
	share := func(partition, perNode string) synergy.Request {
		return synergy.Request{UserID: mallory, Partition: partition, GPU: gres.Request{PerNode: perNode}}
	}
	for _, tc := range []struct {
		name    string
		req     synergy.Request
		refused bool
	}{
		{"shards in a guaranteed partition", share("gpu", "gres:shard:1"), true},
		{"shards in the default partition", share("", "gres/shard:2"), true},
		{"MPS in a guaranteed partition", share("gpu", "gres:mps:50"), true},
		{"shards in the opportunistic partition", share("opp", "gres:shard:1"), false},
		{"shards in a list naming it", share("gpu,opp", "gres:shard:1"), false},
		{"a whole GPU", oneGPU(mallory, "bert"), false},
		{"a gres only named like a share", share("gpu", "gres:myshard:1"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := c.SizeJob(tc.req, shardNodes)
			if (d.Action == synergy.Reject) != tc.refused {
				t.Fatalf("decision %+v, refused want %v", d, tc.refused)
			}
			if tc.refused && !strings.Contains(d.Error, "only for the opportunistic partition \"opp\"") {
				t.Fatalf("the refusal does not say why: %q", d.Error)
			}
		})
	}
	c.cfg.Sharing.Rules.Convert.BelowPct = 0 // conversion off: shares as before
	if d := c.SizeJob(share("gpu", "gres:shard:1"), shardNodes); d.Action == synergy.Reject {
		t.Fatalf("a share refused with conversion off: %+v", d)
	}
}
