package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// Issue 20's gaming attacks, each made by an ordinary user (testUser)
// through sbatch, scancel and scontrol, as anyone with a login could.

// submitAs submits a job as the test user, who can write /tmp only.
func (e *env) submitAs(args ...string) uint32 {
	e.t.Helper()
	testenv.EnsureUser(e.t, testUser)
	id, err := e.c.SubmitAs(testUser, append([]string{"-D", "/tmp", "-o", "/dev/null"}, args...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// TestForgedSizingMarkerInAJobName (20.4): a job named like Lachesis's
// sizing marker, waiting for memory while its GPU is free, once drove the
// Synergy fallback to "shrink" it to the forged share (6 CPUs per GPU, up
// from the 4 it was sized to), through update_job as SlurmUser. Now the
// name loses its brackets on the way into the AdminComment, the fallback
// reads only Lachesis's trailing marker, and the plugin lowers a request
// only.
func TestForgedSizingMarkerInAJobName(t *testing.T) {
	// One node of 8 CPUs, 16000 MB and 2 GPUs: the share is 4 CPUs and
	// 8000 MB per GPU. A job without GPUs holds 12000 MB, so the attacker's
	// job waits for memory with both GPUs and 7 CPUs free.
	e := startShapedCluster(t, shape{Nodes: 1, GPUs: 2, CPUs: 8, MemMB: 16000},
		"synergy:\n  fallback_after: 2\n", "JobSubmitPlugins=synergy")
	filler := e.submit("-J", "filler", "-c1", "--mem=12000", "--wrap", "sleep 600")
	e.waitState(filler, "RUNNING", 30*time.Second)

	forged := "[lachesis:sized cpus=99 mem=9 share_cpus=6 share_mem=9]"
	id := e.submitAs("-J", forged, "--gpus=1", "--wrap", "sleep 600")
	d, err := e.c.ShowJob(id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fields["CpusPerTres"] != gresTRES("gpu:4") {
		t.Fatalf("job sized %s; want the share, 4 CPUs per GPU", d.Fields["CpusPerTres"])
	}
	comment := d.Fields["AdminComment"]
	if n := strings.Count(comment, "[lachesis:"); n != 1 || strings.Contains(comment, forged) {
		t.Fatalf("AdminComment %q holds %d markers; want Lachesis's only", comment, n)
	}
	// The job waits for resources well past fallback_after (2 s) with a
	// pass every second: each pass that sees it may try the fallback.
	e.eventually(30*time.Second, "the job to wait for resources", func() (bool, string) {
		j := e.jobs()[id]
		return j.State == "PENDING" && j.Reason == "Resources", fmt.Sprintf("%+v", j)
	})
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		d, err := e.c.ShowJob(id)
		if err != nil {
			t.Fatal(err)
		}
		if d.Fields["CpusPerTres"] != gresTRES("gpu:4") || d.Fields["MemPerTres"] != gresTRES("gpu:8000") || d.Fields["JobState"] != "PENDING" {
			t.Fatalf("the forged marker resized the job: JobState=%s CpusPerTres=%s MemPerTres=%s AdminComment=%q",
				d.Fields["JobState"], d.Fields["CpusPerTres"], d.Fields["MemPerTres"], d.Fields["AdminComment"])
		}
		time.Sleep(500 * time.Millisecond)
	}
	if e.logMatches(`shrinking a waiting job`) {
		t.Fatal("the core asked to shrink a job Lachesis never enlarged")
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is down")
	}
}

// TestCancelledJobIsNoSweepSample (26.11): an ordinary user's cancelled job
// used to become a finished member of its sweep, so its sibling was ranked
// inside its queue by a GPU-time its owner picked with scancel. Only jobs
// that complete are samples now.
func TestCancelledJobIsNoSweepSample(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  mode: gittins\n  thresholds: [100000]\n  promote_knob: 0\n"+
		"  sibling_window: 600\n  preemption: {min_run: 3600}\n")
	a := e.submitAs("-J", "lr-0.1", "--gpus=2", "--wrap", "sleep 600")
	e.eventually(30*time.Second, "job a to attain 20 GPU-s", func() (bool, string) {
		p := e.prio()
		return p[a].Service >= 20, fmt.Sprintf("a %+v", p[a])
	})
	b := e.submitAs("-J", "lr-0.2", "--gpus=2", "--wrap", "sleep 600")
	e.eventually(30*time.Second, "job b to attain service", func() (bool, string) {
		p := e.prio()
		return p[b].Service > 0, fmt.Sprintf("b %+v", p[b])
	})
	if _, err := e.c.RunAs(testUser, "scancel", fmt.Sprint(a)); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "the ledger to hold job a's end", func() (bool, string) {
		r, ok := e.ledgerRecord(a)
		return ok && r.Finished != 0, fmt.Sprintf("%+v", r)
	})
	// Passes run every second; b's service stays below a's for well over
	// the passes watched here.
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if e.logMatches(fmt.Sprintf(`ranked inside its queue by its sweep.*job_id=%d\b`, b)) {
			t.Fatalf("job %d was ranked by its sweep's cancelled job %d", b, a)
		}
		time.Sleep(500 * time.Millisecond)
	}
	p := e.prio()
	if p[b].Service == 0 {
		t.Fatalf("job b has no service: %+v", p[b])
	}
}

// TestAccountHoppingGainsNothing (20.6): without
// AccountingStorageEnforce=associations (the test cluster has no slurmdbd)
// Slurm accepts any account name. An ordinary user whose real account has
// used GPUs submits with a fresh name: it used to arrive with the default
// shares and no usage, so FAIRSHARE 1000 against the real account's < 500.
func TestAccountHoppingGainsNothing(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  mode: las\n  thresholds: [1000000]\n  promote_knob: 0\n"+
		"fairshare:\n  enabled: true\n  half_life: 3600\n  shares: {physics: 1, biology: 1}\n")
	// physics (the user's real account) runs on every GPU; biology waits.
	var used []uint32
	for i := 0; i < 2; i++ {
		used = append(used, e.submitAs("-A", "physics", "-J", fmt.Sprintf("real-%d", i), "--gpus=2", "--wrap", "sleep 600"))
	}
	for _, id := range used {
		e.waitState(id, "RUNNING", 30*time.Second)
	}
	bio := e.submit("-A", "biology", "-J", "bio", "--gpus=1", "--wrap", "sleep 5")
	real := e.submitAs("-A", "physics", "-J", "real-next", "--gpus=1", "--wrap", "sleep 5")
	hop := e.submitAs("-A", fmt.Sprintf("x%d", time.Now().UnixNano()%100000), "-J", "hop", "--gpus=1", "--wrap", "sleep 5")
	e.eventually(20*time.Second, "physics over its share in sprio", func() (bool, string) {
		p := e.prio()
		return p[real].ID == real && p[hop].ID == hop && p[real].FairShare < 500 && p[bio].FairShare >= 500,
			fmt.Sprintf("real %+v hop %+v bio %+v", p[real], p[hop], p[bio])
	})
	// Several passes: the hop never gets a better factor than the real
	// account, and never one at or under a share.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p := e.prio()
		if p[hop].FairShare > p[real].FairShare || p[hop].FairShare >= 500 {
			t.Fatalf("the fresh account's factor %d beats the real account's %d (biology %d)", p[hop].FairShare, p[real].FairShare, p[bio].FairShare)
		}
		if p[hop].Priority > p[real].Priority {
			t.Fatalf("the fresh account's job outranks the real one: %+v vs %+v", p[hop], p[real])
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !e.logMatches(`account without fair-share shares .*account=x`) {
		t.Error("slurmctld's log does not say the fresh account has no shares")
	}
}

// TestCancelAndResubmitKeepsTheQueue (20.7): an ordinary user's job that
// sank to queue 1 is cancelled (after a checkpoint, say) and submitted
// again: the new job used to start from zero in queue 0. It now inherits
// the service and lands in queue 1. The same user's finished job brought
// back with `scontrol requeue` (within MinJobAge) keeps its ledger record
// instead of restarting it at zero.
func TestCancelAndResubmitKeepsTheQueue(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  mode: las\n  thresholds: [20, 100000]\n  promote_knob: 0\n"+
		"  sibling_window: 600\n  preemption: {min_run: 3600}\n")
	orig := e.submitAs("-J", "train", "--gpus=2", "--wrap", "sleep 600")
	before := e.waitQueue(orig, 1, 60*time.Second)
	if _, err := e.c.RunAs(testUser, "scancel", fmt.Sprint(orig)); err != nil {
		t.Fatal(err)
	}
	e.waitState(orig, "CANCELLED", 30*time.Second)
	// Another user's job takes every GPU, so the resubmission waits: the
	// queue it is ranked in is the one it inherited, not one it earns by
	// running.
	blocker := e.submit("-J", "blocker", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(blocker, "RUNNING", 30*time.Second)
	again := e.submitAs("-J", "train", "--gpus=2", "--wrap", "sleep 600")
	p := e.waitQueue(again, 1, 30*time.Second)
	if p.Service < before.Service || e.jobs()[again].State != "PENDING" {
		t.Fatalf("resubmitted job: %+v (%s); want it waiting with at least the %d GPU-s the cancelled one had",
			p, e.jobs()[again].State, before.Service)
	}
	e.eventually(15*time.Second, "a pass to log the inheritance", func() (bool, string) {
		return e.logMatches(fmt.Sprintf(`job inherits the attained service .*job_id=%d inherited_from_job_id=%d`, again, orig)), ""
	})
	// Passes keep it there (Enqueue gave the first decision).
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if p := e.prio()[again]; p.Queue != 1 {
			t.Fatalf("after a pass the resubmitted job is in queue %d: %+v", p.Queue, p)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := e.c.RunAs(testUser, "scancel", fmt.Sprint(again)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Run("scancel", fmt.Sprint(blocker)); err != nil {
		t.Fatal(err)
	}

	// Another width (no heir of the above): it completes past the first
	// threshold, then its owner requeues it.
	done := e.submitAs("-J", "short", "--gpus=1", "--wrap", "sleep 25")
	e.waitState(done, "COMPLETED", 90*time.Second)
	var rec ledger.Record
	e.eventually(15*time.Second, "the ledger to hold the finished job", func() (bool, string) {
		r, ok := e.ledgerRecord(done)
		rec = r
		return ok && r.Finished != 0 && r.Total() >= 20, fmt.Sprintf("%+v", r)
	})
	if out, err := e.c.RunAs(testUser, "scontrol", "requeue", fmt.Sprint(done)); err != nil {
		t.Fatalf("scontrol requeue of one's own finished job: %v %s", err, out)
	}
	e.eventually(30*time.Second, "the requeued job's record to continue", func() (bool, string) {
		r, ok := e.ledgerRecord(done)
		return ok && r.Finished == 0 && r.Total() >= rec.Total() && r.Runs >= 1, fmt.Sprintf("%+v", r)
	})
	if !e.logMatches(fmt.Sprintf(`finished job requeued: its ledger record continues job_id=%d`, done)) {
		t.Error("slurmctld's log does not say the requeued job's record continues")
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is down")
	}
}
