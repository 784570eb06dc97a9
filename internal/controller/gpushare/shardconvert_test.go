package gpushare

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

var testConvert = sharing.ShardConvert{BelowPct: 50, MemBelowMB: 16384, MinJobs: 2, HeadroomPct: 10}

// shardNodes: one node of 8 CPUs, 16000 MB and one GPU of 4 shards.
var shardNodes = []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1,shard:4"}}

func oneGPU(uid uint32, model string) synergy.Request {
	return synergy.Request{UserID: uid, Comment: "model=" + model, Partition: "gpu", GPU: gres.Request{PerJob: "gres:gpu:1"}}
}

// finishJob runs job id of uid and model on one GPU through passes with
// three usage reports of util percent and memMB, then lets it end.
func finishJob(c *testCore, now int64, id, uid uint32, model string, util, memMB float64) int64 {
	s := runningAs(id, uid)
	s.OneGPU, s.Run = true, modelRun(model)
	pass(c, now, s)
	for i := range int64(3) {
		c.ReportGPUUse(usageReport("n1", now+1+i, id, uid, []float64{util}, memMB, nil))
	}
	pass(c, now+10, s)
	pass(c, now+20) // gone: its summary closes and joins the history
	return now + 30
}

func convertCore(t *testing.T, db string) *testCore {
	t.Helper()
	cfg := testConfig(db)
	cfg.Sharing.Rules.Convert = testConvert
	return openCoreWith(t, cfg)
}

// The rule end to end in the core: a user's quiet jobs of a model make
// their next one-GPU job of it shards; the history survives a restart.
// The attack: mallory runs idle jobs of owner's model key, which changes
// nothing for owner, and owner's history changes nothing for mallory.
func TestShardConversionFollowsTheUsersOwnHistoryOnly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := convertCore(t, db)
	now := int64(1000)
	for id := uint32(1); id <= 3; id++ { // mallory's idle "bert" jobs
		now = finishJob(c, now, id, mallory, "bert", 1, 100)
	}
	if d := c.SizeJob(oneGPU(owner, "bert"), shardNodes); d.Action == synergy.ToShards {
		t.Fatalf("owner's job converted on mallory's history: %+v", d)
	}
	now = finishJob(c, now, 10, owner, "bert", 20, 2048)
	if d := c.SizeJob(oneGPU(owner, "bert"), shardNodes); d.Action == synergy.ToShards {
		t.Fatalf("converted after one measured job of the user's (convert_min_jobs 2): %+v", d)
	}
	now = finishJob(c, now, 11, owner, "bert", 30, 4096)
	d := c.SizeJob(oneGPU(owner, "BERT"), shardNodes)
	if d.Action != synergy.ToShards || d.Shards != 2 {
		t.Fatalf("owner's third job %+v; want 2 shards of 4", d)
	}
	// The proportional share (8 CPUs, 16000 MB for the node's one GPU)
	// shrinks with the job's share of the GPU: the guest's come with the rest.
	if d.CPUsPerGPU != 4 || d.MemMBPerGPU != 8000 {
		t.Fatalf("CPUs %d, memory %d MB; want 4, 8000 (half the node)", d.CPUsPerGPU, d.MemMBPerGPU)
	}
	for _, want := range []string{"shard:2 of a GPU's 4", "last 2 jobs", "peaked at 30% GPU, 4096 MB", "--comment=whole_gpu"} {
		if !strings.Contains(d.Reason, want) {
			t.Fatalf("reason %q lacks %q", d.Reason, want)
		}
	}
	if strings.Contains(d.Reason, synergy.SizedMarker) {
		t.Fatalf("a job on shards carries the sizing marker start-time sizing would resize as per GPU: %q", d.Reason)
	}
	if d := c.SizeJob(oneGPU(mallory, "gpt"), shardNodes); d.Action == synergy.ToShards {
		t.Fatalf("mallory's job of another model converted: %+v", d)
	}
	// One busy job of the model stops the rewrite while it is remembered.
	finishJob(c, now, 12, owner, "bert", 90, 4096)
	if d := c.SizeJob(oneGPU(owner, "bert"), shardNodes); d.Action == synergy.ToShards {
		t.Fatalf("converted although the last job peaked at 90%%: %+v", d)
	}
	// A restart keeps the histories (the writer saved them on Close).
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = convertCore(t, db)
	defer c.Close()
	if h := c.hist.summary(owner, "bert"); h.Jobs != 3 || h.UtilPeak != 90 {
		t.Fatalf("owner's history after a restart %+v; want 3 jobs, peak 90", h)
	}
	if h := c.hist.summary(mallory, "bert"); h.Jobs != 3 || h.UtilPeak != 1 {
		t.Fatalf("mallory's history after a restart %+v; want 3 jobs, peak 1", h)
	}
}

// A user who invents model keys without end keeps only their newest
// historyKeysPerUser histories and never evicts another user's.
func TestShardHistoryIsBoundedPerUser(t *testing.T) {
	var h modelUse
	h.add(ledger.ModelJobUse{User: owner, Model: "bert", JobID: 1, UtilPeak: 10})
	for i := range 10 * historyKeysPerUser {
		for j := range historyJobs + 2 {
			h.add(ledger.ModelJobUse{User: mallory, Model: fmt.Sprintf("m%d", i), JobID: uint32(100 + j), UtilPeak: 1})
		}
	}
	if n := h.perUser[mallory]; n != historyKeysPerUser || len(h.m) != historyKeysPerUser+1 {
		t.Fatalf("mallory holds %d histories, %d in all; want %d and one more", n, len(h.m), historyKeysPerUser)
	}
	if s := h.summary(owner, "bert"); s.Jobs != 1 {
		t.Fatalf("owner's history after mallory's flood: %+v", s)
	}
	if s := h.summary(mallory, fmt.Sprintf("m%d", 10*historyKeysPerUser-1)); s.Jobs != historyJobs {
		t.Fatalf("one history holds %d jobs; want the last %d", s.Jobs, historyJobs)
	}
}

// BenchmarkSizeJobShards: a one-GPU submission with the rewrite off, and
// on with every history slot taken (the lookup under hist.mu is what the
// rewrite adds on the sizing goroutine).
func BenchmarkSizeJobShards(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("convert=%v", on), func(b *testing.B) {
			cfg := testConfig(filepath.Join(b.TempDir(), "l.db"))
			if on {
				cfg.Sharing.Rules.Convert = testConvert
			}
			c := openCoreWith(b, cfg)
			defer c.Close()
			for i := range historyKeys {
				for j := range 2 {
					c.hist.add(ledger.ModelJobUse{User: uint32(i / historyKeysPerUser), Model: fmt.Sprintf("m%d", i), JobID: uint32(j), UtilPeak: 10, MemPeakMB: 1})
				}
			}
			req := oneGPU(0, "m1")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if d := c.SizeJob(req, shardNodes); on != (d.Action == synergy.ToShards) {
					b.Fatalf("convert %v gave %+v", on, d)
				}
			}
		})
	}
}
