package sharing

import (
	"testing"

	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

const owner = 1001

var testConvert = ShardConvert{BelowPct: 50, MemBelowMB: 16384, MinJobs: 2, HeadroomPct: 10}

// shardNodes: one node of 8 CPUs, 16000 MB and one GPU of 4 shards.
var shardNodes = []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1,shard:4"}}

func oneGPU(uid uint32, model string) synergy.Request {
	return synergy.Request{UserID: uid, Comment: "model=" + model, Partition: "gpu", GPU: gres.Request{PerJob: "gres:gpu:1"}}
}

func TestShardPlan(t *testing.T) {
	quiet := ShardHistory{Jobs: 3, UtilPeak: 20, MemPeakMB: 2000}
	req := oneGPU(owner, "bert")
	with := func(f func(*synergy.Request)) synergy.Request { r := req; f(&r); return r }
	off := testConvert
	off.BelowPct = 0
	tests := []struct {
		name          string
		conv          ShardConvert
		opportunistic bool
		req           synergy.Request
		nodes         []synergy.Node
		hist          ShardHistory
		want          string
		shards        int
	}{
		{"converted_to_half_a_gpu", testConvert, false, req, shardNodes, quiet, ShardsConverted, 2},
		{"converted_by_gres_gpu_1", testConvert, false, with(func(r *synergy.Request) { r.GPU = gres.Request{PerNode: "gres:gpu:1"} }), shardNodes, quiet, ShardsConverted, 2},
		{"converted_to_measured_peak_plus_headroom", ShardConvert{BelowPct: 70, MemBelowMB: 16384, MinJobs: 2, HeadroomPct: 10},
			false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1,shard:10"}}, ShardHistory{Jobs: 2, UtilPeak: 61, MemPeakMB: 1}, ShardsConverted, 8},
		{"off_by_default", DefaultConfig().Convert, false, req, shardNodes, quiet, ShardsOff, 0},
		{"off", off, false, req, shardNodes, quiet, ShardsOff, 0},
		{"opportunistic", testConvert, true, req, shardNodes, quiet, ShardsOpportunistic, 0},
		{"two_gpus", testConvert, false, with(func(r *synergy.Request) { r.GPU.PerJob = "gres:gpu:2" }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"absurd_gpu_count", testConvert, false, with(func(r *synergy.Request) { r.GPU.PerJob = "gres:gpu:99999999999999999999" }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"typed_gpu", testConvert, false, with(func(r *synergy.Request) { r.GPU.PerJob = "gres:gpu:a100:1" }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"one_gpu_per_node_on_two_nodes", testConvert, false, with(func(r *synergy.Request) { r.GPU = gres.Request{PerNode: "gres:gpu:1", Nodes: 2} }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"two_tasks", testConvert, false, with(func(r *synergy.Request) { r.GPU.Tasks = 2 }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"gpu_per_task", testConvert, false, with(func(r *synergy.Request) { r.GPU = gres.Request{PerTask: "gres:gpu:1"} }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"gpu_and_other_gres", testConvert, false, with(func(r *synergy.Request) { r.GPU.PerJob = "gres:gpu:1,gres:license:1" }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"gpu_per_job_and_per_node", testConvert, false, with(func(r *synergy.Request) { r.GPU.PerNode = "gres:gpu:1" }), shardNodes, quiet, ShardsNotOneGPU, 0},
		{"opted_out_by_comment", testConvert, false, with(func(r *synergy.Request) { r.Comment = "model=bert,whole_gpu" }), shardNodes, quiet, ShardsOptedOut, 0},
		{"opted_out_by_exclusive", testConvert, false, with(func(r *synergy.Request) { r.Exclusive = true }), shardNodes, quiet, ShardsOptedOut, 0},
		{"no_shards_on_the_nodes", testConvert, false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1"}}, quiet, ShardsNoShards, 0},
		{"a_gpu_node_without_shards", testConvert, false, req, append([]synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:2"}}, shardNodes...), quiet, ShardsNoShards, 0},
		{"nodes_of_different_shards_per_gpu", testConvert, false, req, append([]synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1,shard:8"}}, shardNodes...), quiet, ShardsNoShards, 0},
		{"absurd_shard_count", testConvert, false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1,shard:99999999999999"}}, quiet, ShardsNoShards, 0},
		{"one_shard_per_gpu", testConvert, false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1,shard:1"}}, quiet, ShardsNoShards, 0},
		{"converted_on_nodes_with_socket_suffixes", testConvert, false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1(S:0),shard:4(S:0)"}}, quiet, ShardsConverted, 2},
		{"converted_on_typed_nodes_over_two_sockets", testConvert, false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:a100:2(S:0-1),shard:8(S:0,1)"}}, quiet, ShardsConverted, 2},
		{"malformed_socket_suffix_is_no_shards", testConvert, false, req, []synergy.Node{{CPUs: 8, MemMB: 16000, Gres: "gpu:1(S:0),shard:4(S:x)"}}, quiet, ShardsNoShards, 0},
		{"few_jobs", testConvert, false, req, shardNodes, ShardHistory{Jobs: 1, UtilPeak: 5, MemPeakMB: 1}, ShardsFewJobs, 0},
		{"no_history", testConvert, false, req, shardNodes, ShardHistory{}, ShardsFewJobs, 0},
		{"busy", testConvert, false, req, shardNodes, ShardHistory{Jobs: 3, UtilPeak: 50, MemPeakMB: 1}, ShardsBusy, 0},
		{"memory", testConvert, false, req, shardNodes, ShardHistory{Jobs: 3, UtilPeak: 5, MemPeakMB: 16384}, ShardsMemory, 0},
		{"no_room", ShardConvert{BelowPct: 95, MemBelowMB: 16384, MinJobs: 1, HeadroomPct: 10}, false, req, shardNodes,
			ShardHistory{Jobs: 3, UtilPeak: 80, MemPeakMB: 1}, ShardsNoRoom, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.conv.Plan(tc.opportunistic, tc.req, tc.nodes, tc.hist)
			if p.Outcome != tc.want || p.Shards != tc.shards {
				t.Fatalf("outcome %q with %d shards; want %q with %d", p.Outcome, p.Shards, tc.want, tc.shards)
			}
		})
	}
}

// A job's user-given CPUs and memory per GPU carry over as per task and
// per node; a profile's best case is the model's need and is not scaled.
func TestShardConversionKeepsTheUsersAndTheProfilesNumbers(t *testing.T) {
	p := ShardPlan{Outcome: ShardsConverted, Shards: 2, ShardsPerGPU: 4, Hist: ShardHistory{Jobs: 2}}
	req := oneGPU(owner, "bert")
	req.CPUsPerTRES, req.MemPerTRES = "gres:gpu:3", "gres:gpu:5000"
	if d := testConvert.Rewrite(req, synergy.Decision{Action: synergy.Leave}, p); d.CPUsPerGPU != 3 || d.MemMBPerGPU != 5000 {
		t.Fatalf("user's numbers became %d CPUs, %d MB; want 3, 5000", d.CPUsPerGPU, d.MemMBPerGPU)
	}
	prof := synergy.Decision{Action: synergy.Set, CPUsPerGPU: 6, MemMBPerGPU: 12000, Profiled: true}
	if d := testConvert.Rewrite(oneGPU(owner, "bert"), prof, p); d.CPUsPerGPU != 6 || d.MemMBPerGPU != 12000 {
		t.Fatalf("profile's best case became %d CPUs, %d MB; want 6, 12000", d.CPUsPerGPU, d.MemMBPerGPU)
	}
	if d := testConvert.Rewrite(oneGPU(owner, "bert"), synergy.Decision{Action: synergy.Leave}, p); d.CPUsPerGPU != 0 || d.MemMBPerGPU != 0 {
		t.Fatalf("nothing asked, nothing sized: got %d CPUs, %d MB; want both left alone", d.CPUsPerGPU, d.MemMBPerGPU)
	}
}
