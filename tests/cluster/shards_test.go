package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// GPU sharing in Lachesis is built on Slurm's gres/shard (docs/design:
// "GPU sharing uses Slurm's own GRES"). This pins the two facts of Slurm
// 22.05 it relies on, on the loopback cluster's fake GPUs: two jobs asking
// for shards of one GPU run on it at once and both see it as their
// CUDA_VISIBLE_DEVICES; and a GPU handed out as shards is not handed out
// as a whole GPU (a gpu:1 job waits until the shards are free).
func TestShardsLetTwoJobsShareOneGPU(t *testing.T) {
	e := startShapedCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4}, "")
	out := func(name string) string { return filepath.Join(e.dir, name+".out") }
	wrap := `echo "CVD=$CUDA_VISIBLE_DEVICES"; sleep 600`
	a := e.submit("-J", "share_a", "-o", out("a"), "--gres=shard:2", "--wrap", wrap)
	b := e.submit("-J", "share_b", "-o", out("b"), "--gres=shard:2", "--wrap", wrap)
	e.waitState(a, "RUNNING", 60*time.Second)
	e.waitState(b, "RUNNING", 60*time.Second)
	for _, n := range []string{"a", "b"} {
		e.eventually(30*time.Second, "job "+n+" prints its GPU", func() (bool, string) {
			got, _ := os.ReadFile(out(n))
			return strings.Contains(string(got), "CVD=0\n"), string(got)
		})
	}
	whole := e.submit("-J", "whole", "--gpus=1", "--wrap", "sleep 1")
	e.eventually(30*time.Second, "the whole-GPU job waiting for resources", func() (bool, string) {
		j := e.jobs()[whole]
		return j.State == "PENDING" && j.Reason == "Resources", fmt.Sprintf("%+v", j)
	})
	e.cancel(a)
	e.cancel(b)
	e.eventually(60*time.Second, "the whole-GPU job to run once the shards are free", func() (bool, string) {
		j := e.jobs()[whole]
		return j.State == "RUNNING" || j.State == "COMPLETED", fmt.Sprintf("%+v", j)
	})
}

// A job on gres/mps (CUDA MPS, a share of the node's one MPS GPU) is a GPU
// job to Lachesis, as one on shards is: an ordinary user's --gres=mps:100
// job, which holds the GPU's whole compute, is charged as a 1-GPU job (not
// in GPU-equivalents of its CPUs, as a job without GPUs is), demoted past
// the 20 GPU-s threshold, and requeued for a new one-GPU job of queue 0
// that needs that GPU. Before, Lachesis read it as a job without GPUs,
// which a GPU job never preempts: the new job waited behind it.
func TestMPSJobIsChargedAndRequeuedForAGPUJob(t *testing.T) {
	e := startShapedCluster(t, shape{Nodes: 1, GPUs: 1, MPSPerNode: 100}, demotedYAML)
	mps := e.submitAs("-J", "mps", "--gres=mps:100", "--wrap", "sleep 600")
	e.waitState(mps, "RUNNING", 60*time.Second)
	p := e.waitQueue(mps, 1, 90*time.Second)
	if e.logMatches(fmt.Sprintf(`job without GPUs charged in GPU-equivalents job_id=%d `, mps)) {
		t.Fatal("slurmctld's log charges the MPS job as a job without GPUs")
	}
	if p.Service < 20 {
		t.Fatalf("the MPS job demoted with %d GPU-s of service; want >= 20", p.Service)
	}
	e.eventually(30*time.Second, "the ledger to charge the MPS job", func() (bool, string) {
		r, ok := e.ledgerRecord(mps)
		return ok && r.Total() >= 20, fmt.Sprintf("%+v", r)
	})

	gpuJob := e.submit("-J", "gpu", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(gpuJob, "RUNNING", 90*time.Second)
	if r := e.restarts(mps); r != 1 {
		t.Fatalf("MPS job restarts %d; want 1 (requeued for the new GPU job)", r)
	}
}
