package cluster_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// AntMan's opportunistic class in slurmctld (issue 22 items 3 and 6,
// issue 34 item 9): the jobs of the partition
// sharing.opportunistic_partition names compete with every job by
// attained service for idle GPUs, are the first victims of a guaranteed
// job of a better Tiresias queue, preempt nothing, and are
// upgraded to guaranteed after waiting sharing.promote_after.

// oppPartition is the opportunistic partition's slurm.conf line, as
// etc/slurm.conf.lachesis documents it: the same nodes and PriorityTier as
// the guaranteed partition, so Slurm orders both by the priority Lachesis
// sets.
const oppPartition = "PartitionName=opp Nodes=ALL MaxTime=INFINITE State=UP"

// oppYAML is the sharing section naming it, upgrading after promoteAfter
// seconds (0: never).
func oppYAML(promoteAfter int) string {
	return fmt.Sprintf("sharing:\n  opportunistic_partition: opp\n  promote_after: %d\n", promoteAfter)
}

// An opportunistic job competes by attained service (sharing's default
// rule, issue 34 item 9): it runs on idle GPUs, and a guaranteed job of
// its own Tiresias queue or a worse one, which attained-service ranking
// puts no earlier, does not take them (under the strict rule,
// sharing.strict_opportunistic, any guaranteed job did: the class starved
// in busy clusters); a guaranteed job of a better queue takes them at
// once, a minute or two into its run (min_run, 600 s by default, does not
// shield it).
func TestOpportunisticJobYieldsToAGuaranteedJobOfABetterQueueOnly(t *testing.T) {
	// Queue 1 from 60 GPU-s: 15 s for the 4-GPU job, 60 s for the 1-GPU
	// opportunistic job. min_run and inheritance at their defaults.
	e := startCluster(t, 1, "tiresias:\n  mode: las\n  thresholds: [60, 1000000]\n  promote_knob: 0\n"+oppYAML(0),
		oppPartition)
	// A guaranteed job of 4 GPUs runs into queue 1 and is cancelled: the
	// next 4-GPU job of the same user inherits its queue (inherit_service).
	first := e.submit("-J", "first", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(first, "RUNNING", 60*time.Second)
	e.waitQueue(first, 1, 120*time.Second)
	e.cancel(first)
	// Ended for Lachesis too: the pass that records the end keeps its
	// service for an heir, and the ledger writer saves the end after.
	e.eventually(60*time.Second, "the first job's end in the ledger", func() (bool, string) {
		r, ok := e.ledgerRecord(first)
		return ok && r.Finished != 0, fmt.Sprintf("%+v", r)
	})

	// The opportunistic job takes 1 idle GPU (another GPU count: it
	// inherits nothing), in queue 0 for its first 60 s, then in queue 1.
	opp := e.submit("-p", "opp", "-J", "opp", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(opp, "RUNNING", 60*time.Second)

	// The guaranteed job, in queue 1, needs all 4 GPUs: Slurm tries it
	// against the opportunistic job (in queue 0 or 1 by then), and it
	// waits.
	worse := e.submit("-J", "worse", "--gpus=4", "--wrap", "sleep 600")
	e.waitQueue(worse, 1, 60*time.Second)
	e.triedAndWaits(worse)
	if r, j := e.restarts(opp), e.jobs()[opp]; r != 0 || j.State != "RUNNING" {
		t.Fatalf("opportunistic job: %s, %d restarts; want it running, not evicted for a guaranteed job of queue 1", j.State, r)
	}

	// Once the opportunistic job is in queue 1, a guaranteed job of queue
	// 0 (the test user's: it inherits nothing) needing the 4 GPUs takes
	// its GPU at once.
	e.waitQueue(opp, 1, 120*time.Second)
	peer := e.submitAs("-J", "peer", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(peer, "RUNNING", 90*time.Second)
	if r := e.restarts(opp); r != 1 {
		t.Fatalf("opportunistic job restarts %d; want 1 (requeued for the guaranteed job of queue 0)", r)
	}
	// The pass that sees the requeue records it; the ledger writer saves it
	// after.
	want := regexp.MustCompile(fmt.Sprintf(`^preempted by job %d \(queue 0\) from queue 1 after a \d+ s run$`, peer))
	var rec ledger.Record
	e.eventually(30*time.Second, "the opportunistic job's preemption, by the guaranteed job of queue 0, in the ledger", func() (bool, string) {
		r, ok := e.ledgerRecord(opp)
		rec = r
		return ok && want.MatchString(r.PreemptReason), fmt.Sprintf("%q", r.PreemptReason)
	})
	if rec.LastRun >= 600 {
		t.Fatalf("opportunistic job ran %v s before it yielded", rec.LastRun)
	}
}

// An opportunistic job preempts nothing, not even a guaranteed job of a
// lower queue that a guaranteed job of its queue would preempt at once
// (min_run 0). Listing a guaranteed partition beside the opportunistic
// one, or naming the job after it, does not make it guaranteed; a user
// cannot move another user's job into the opportunistic partition.
func TestOpportunisticJobNeverPreemptsAGuaranteedJob(t *testing.T) {
	e := startCluster(t, 1, demotedYAML+oppYAML(0), oppPartition)
	running := e.submit("-J", "running", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(running, "RUNNING", 60*time.Second)
	e.waitQueue(running, 1, 60*time.Second)

	opp := e.submit("-p", "opp", "-J", "opp", "--gpus=1", "--wrap", "sleep 600")
	e.triedAndWaits(opp)
	// One at a time: a job behind another of its partitions waits for
	// "Priority", and is never tried against running jobs.
	e.cancel(opp)
	listed := e.submitAs("-p", "gpu,opp", "-J", "gpu", "--comment", "partition=gpu", "--gpus=1", "--wrap", "sleep 600")
	e.triedAndStaysPending(listed)
	if r := e.restarts(running); r != 0 || e.jobs()[running].State != "RUNNING" {
		t.Fatalf("guaranteed job: %s, %d restarts; want it running, never preempted by an opportunistic job", e.jobs()[running].State, r)
	}

	// Another user's held guaranteed job: the test user may not move it
	// into the opportunistic partition (Slurm's own check; Lachesis reads
	// the class from nothing else).
	held := e.submit("-J", "held", "--hold", "--gpus=1", "--wrap", "sleep 600")
	out, err := e.c.Run("runuser", "-u", testUser, "--", "scontrol", "update", fmt.Sprintf("jobid=%d", held), "partition=opp")
	if err == nil {
		t.Fatalf("the test user moved root's job into the opportunistic partition: %s", out)
	}
	if d, _ := e.c.ShowJob(held); d.Fields["Partition"] != "gpu" {
		t.Fatalf("root's job is in partition %q after the test user's update; want gpu", d.Fields["Partition"])
	}

	// A guaranteed job of queue 0 does preempt it (the rule is the
	// class's, not a broken preemption).
	peer := e.submit("-J", "peer", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(peer, "RUNNING", 60*time.Second)
	if r := e.restarts(running); r != 1 {
		t.Fatalf("guaranteed job restarts %d after a guaranteed job of queue 0 came; want 1", r)
	}
}

// An opportunistic job that waits sharing.promote_after is upgraded to
// guaranteed for good: slurmctld logs it once, its SystemComment marker
// says when (up=), and from then on it has a guaranteed job's rights: in
// queue 0 it preempts the demoted guaranteed job it could not touch
// before. Its priority is not lowered: ranked by attained service already
// (the default rule), it keeps its place (under the strict rule it rose
// from the opportunistic band).
func TestOpportunisticJobIsUpgradedAfterWaiting(t *testing.T) {
	const promoteAfter = 45
	e := startCluster(t, 1, demotedYAML+oppYAML(promoteAfter), oppPartition)
	running := e.submit("-J", "running", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(running, "RUNNING", 60*time.Second)
	e.waitQueue(running, 1, 60*time.Second)

	opp := e.submit("-p", "opp", "-J", "opp", "--gpus=1", "--wrap", "sleep 600")
	submitted := time.Now()
	e.triedAndWaits(opp)
	if waited := time.Since(submitted); waited >= promoteAfter*time.Second {
		t.Fatalf("the check before the upgrade took %v, past promote_after", waited)
	}
	before := e.prio()[opp].Priority
	// Slurm's schedulers reset the reason when they try the job; the next
	// pass sets it again.
	e.eventually(15*time.Second, "the waiting opportunistic job's reason to say its class and when it is upgraded", func() (bool, string) {
		j := e.jobs()[opp]
		return j.State == "PENDING" && strings.HasPrefix(j.Reason, "Lachesis: opportunistic: waits its turn by attained service, evicted first; guaranteed from "), fmt.Sprintf("%+v", j)
	})

	e.waitState(opp, "RUNNING", (promoteAfter+90)*time.Second)
	// Slurm keeps times in whole seconds: the wait counts from the
	// submission's second, up to 1 s before sbatch returned.
	if waited := time.Since(submitted); waited < (promoteAfter-1)*time.Second {
		t.Fatalf("opportunistic job ran after %v, before promote_after (%d s)", waited, promoteAfter)
	}
	if r := e.restarts(running); r != 1 {
		t.Fatalf("guaranteed job restarts %d; want 1 (preempted by the upgraded job)", r)
	}
	line := regexp.MustCompile(fmt.Sprintf(`opportunistic job upgraded to guaranteed.*job_id=%d\b`, opp))
	if n := len(line.FindAllString(e.c.ControllerLog(), -1)); n != 1 {
		t.Fatalf("the upgrade of job %d is logged %d times; want once", opp, n)
	}
	d, err := e.c.ShowJob(opp)
	if err != nil {
		t.Fatal(err)
	}
	if sc := d.Fields["SystemComment"]; !regexp.MustCompile(`lachesis:v1 .* up=\d+`).MatchString(sc) {
		t.Fatalf("SystemComment %q has no upgrade", sc)
	}
	if after := e.prio()[opp].Priority; after < before {
		t.Fatalf("priority %d after the upgrade, %d before; want it kept or raised", after, before)
	}
	e.eventually(30*time.Second, "the upgrade in the ledger", func() (bool, string) {
		rec, _ := e.ledgerRecord(opp)
		return rec.Upgraded != 0, fmt.Sprintf("%+v", rec)
	})
}

// triedAndStaysPending is triedAndWaits for a job of several partitions,
// which Slurm leaves waiting with other reasons than Resources (e.g. "Nodes
// required for job are DOWN, DRAINED or reserved for jobs in higher
// priority partitions"): any reason says the scheduler tried it.
func (e *env) triedAndStaysPending(id uint32) {
	e.t.Helper()
	e.eventually(60*time.Second, fmt.Sprintf("Slurm to try job %d", id), func() (bool, string) {
		j := e.jobs()[id]
		return j.State != "PENDING" || (j.Reason != "" && j.Reason != "None"), fmt.Sprintf("%+v", j)
	})
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if j := e.jobs()[id]; j.State != "PENDING" {
			e.t.Fatalf("job %d %s; want it left waiting", id, j.State)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// An opportunistic job starts on the share of a GPU a guaranteed job left
// (both on gres/shard: Slurm 22.05 gives a GPU out whole or as shards,
// never both), and is the first victim there too: once it is in a worse
// queue, a guaranteed job asking for that share requeues it at once.
// Before, a job on shards was a job without GPUs to Lachesis: it neither
// preempted nor was preempted, and the guaranteed job waited behind the
// opportunistic one.
func TestOpportunisticJobRunsOnAShareBesideAGuaranteedJob(t *testing.T) {
	// Queue 1 from 30 GPU-s (a share counts as one GPU).
	e := startShapedCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4},
		"tiresias:\n  mode: las\n  thresholds: [30, 1000000]\n  promote_knob: 0\n"+oppYAML(0), oppPartition)
	guaranteed := e.submit("-J", "guaranteed", "--gres=shard:3", "--wrap", "sleep 600")
	e.waitState(guaranteed, "RUNNING", 60*time.Second)
	opp := e.submit("-p", "opp", "-J", "opp", "--gres=shard:1", "--wrap", "sleep 600")
	e.waitState(opp, "RUNNING", 60*time.Second)
	e.waitQueue(opp, 1, 120*time.Second)
	if d, err := e.c.ShowJob(guaranteed); err != nil || e.jobs()[guaranteed].State != "RUNNING" {
		t.Fatalf("the guaranteed job beside the opportunistic one: %+v, %v", d.State, err)
	}

	second := e.submit("-J", "second", "--gres=shard:1", "--wrap", "sleep 600")
	e.waitState(second, "RUNNING", 90*time.Second)
	if r := e.restarts(opp); r != 1 {
		t.Fatalf("opportunistic job restarts %d; want 1 (requeued for the guaranteed job's share)", r)
	}
	if r := e.restarts(guaranteed); r != 0 || e.jobs()[guaranteed].State != "RUNNING" {
		t.Fatalf("the first guaranteed job: %s, %d restarts; want it running, untouched", e.jobs()[guaranteed].State, r)
	}
}
