package cluster_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
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

// TestChainedAndHeldCopiesInheritTheQueue (34.7): an ordinary user queues
// copies of one job with the original, inside tiresias.sibling_window of
// it, that cannot run while it runs: one chained with
// --dependency=afterany, two held (sbatch -H). Each time the running copy
// sinks to queue 1 they cancel it and let the next one go: the chained
// copy starts when the original is cancelled, the first held one is
// released after its predecessor's cancel, the second just before it
// (waiting for the GPUs its predecessor holds). Each used to start from
// zero in queue 0, since it was submitted with the original, like a
// sweep's member. Each now inherits the service of the copy it replaces.
// The chained copy, let go by the cancel between two passes, also took the
// freed GPUs ahead of another user's job waiting in queue 0 (its place
// there dated from its submission); it now stands last in its queue while
// it cannot run, and waits. Two jobs submitted ready together (an honest
// sweep) still pass nothing to each other.
func TestChainedAndHeldCopiesInheritTheQueue(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  mode: las\n  thresholds: [20, 100000]\n  promote_knob: 0\n"+
		"  sibling_window: 600\n  preemption: {min_run: 3600}\n")
	// Another user's job holds half of the node's 4 GPUs throughout, so a
	// copy released while its predecessor runs has to wait.
	blocker := e.submit("-J", "other", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(blocker, "RUNNING", 30*time.Second)
	orig := e.submitAs("-J", "train", "--gpus=2", "--wrap", "sleep 600")
	chained := e.submitAs("-J", "train", "--gpus=2", fmt.Sprintf("--dependency=afterany:%d", orig), "--wrap", "sleep 600")
	held := e.submitAs("-H", "-J", "train", "--gpus=2", "--wrap", "sleep 600")
	early := e.submitAs("-H", "-J", "train", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(orig, "RUNNING", 30*time.Second)
	e.waitQueue(orig, 1, 60*time.Second)

	// inherits cancels prev (its owner, as it sinks) and checks that next
	// takes over its service in queue 1 within a few passes, while its own
	// run could not have earned it. It reports, not stops, so that a run
	// on older code shows every copy that starts fresh.
	floor := int64(0) // the service the last copy took over
	inherits := func(what string, prev, next uint32, release func()) {
		t.Helper()
		// prev runs a little past what it took over, so that its
		// service is its own: the next copy must have at least that.
		e.eventually(30*time.Second, fmt.Sprintf("job %d to run past %d GPU-s", prev, floor+4), func() (bool, string) {
			p := e.prio()[prev]
			return p.Service >= floor+4, fmt.Sprintf("%+v", p)
		})
		last := e.prio()[prev].Service
		floor = last
		if _, err := e.c.RunAs(testUser, "scancel", fmt.Sprint(prev)); err != nil {
			t.Fatal(err)
		}
		e.waitState(prev, "CANCELLED", 30*time.Second)
		if release != nil {
			release()
		}
		if release != nil || next != chained {
			e.waitState(next, "RUNNING", 30*time.Second)
		}
		logged := fmt.Sprintf(`job inherits the attained service .*job_id=%d inherited_from_job_id=\d+`, next)
		var p slurmcluster.Prio
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			p = e.prio()[next]
			if e.logMatches(logged) && p.Queue == 1 && p.Service >= last {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("%s: job %d runs in queue %d with %d GPU-s (logged: %v); want it in queue 1 with at least the %d its cancelled copy %d had",
			what, next, p.Queue, p.Service, e.logMatches(logged), last, prev)
	}
	release := func(id uint32) {
		if out, err := e.c.RunAs(testUser, "scontrol", "release", fmt.Sprint(id)); err != nil {
			t.Fatalf("scontrol release %d: %v %s", id, err, out)
		}
	}

	// Another user's job waits in queue 0 for the GPUs the original holds,
	// ranked by a pass.
	rival := e.submit("-J", "rival", "--gpus=2", "--wrap", "sleep 600")
	e.waitPasses(2)
	inherits("the chained copy", orig, chained, nil)
	e.eventually(30*time.Second, "the freed GPUs to be taken", func() (bool, string) {
		j := e.jobs()
		return j[rival].State == "RUNNING" || j[chained].State == "RUNNING", fmt.Sprintf("rival %+v chained %+v", j[rival], j[chained])
	})
	if j := e.jobs()[chained]; j.State != "PENDING" {
		t.Errorf("the chained copy let go by the cancel took the freed GPUs ahead of another user's job waiting in queue 0: %+v", j)
	}
	if _, err := e.c.Run("scancel", fmt.Sprint(rival)); err != nil {
		t.Fatal(err)
	}
	e.waitState(chained, "RUNNING", 30*time.Second)
	inherits("the copy released after the cancel", chained, held, func() { release(held) })
	// The second held copy is released while its predecessor still runs
	// (well after that run began) and waits for its GPUs: it can run the
	// moment its predecessor is cancelled.
	time.Sleep(15 * time.Second)
	release(early)
	e.eventually(15*time.Second, "the released copy to wait for resources", func() (bool, string) {
		j := e.jobs()[early]
		return j.State == "PENDING" && j.Reason == "Resources", fmt.Sprintf("%+v", j)
	})
	inherits("the copy released before the cancel", held, early, nil)

	// An honest sweep: two runs of another width submitted ready together,
	// run side by side; the first is stopped early. The second keeps its
	// own service.
	for _, id := range []uint32{early, blocker} {
		if _, err := e.c.Run("scancel", fmt.Sprint(id)); err != nil {
			t.Fatal(err)
		}
	}
	lr1 := e.submitAs("-J", "lr-0.1", "--gpus=1", "--wrap", "sleep 600")
	lr2 := e.submitAs("-J", "lr-0.2", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(lr1, "RUNNING", 30*time.Second)
	e.waitState(lr2, "RUNNING", 30*time.Second)
	e.waitQueue(lr1, 1, 60*time.Second)
	if _, err := e.c.RunAs(testUser, "scancel", fmt.Sprint(lr1)); err != nil {
		t.Fatal(err)
	}
	e.waitState(lr1, "CANCELLED", 30*time.Second)
	e.waitPasses(3)
	if e.logMatches(fmt.Sprintf(`job inherits the attained service .*job_id=%d\b`, lr2)) {
		t.Errorf("the sweep's second run %d inherited the service of the first, cancelled early", lr2)
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is down")
	}
}

// TestArrayTasksLetGoOneAtATimeInherit (34.7): the chain of copies built
// from one job array throttled to one task at a time (sbatch
// --array=0-2%1): its owner cancels each task as it sinks and Slurm lets
// the next one go. Each task used to start from zero in queue 0; now it
// inherits. An array throttled to two (a sweep capped at two runs at
// once) stays a sweep: the task its throttle lets go at a sibling's cancel
// keeps its own service.
func TestArrayTasksLetGoOneAtATimeInherit(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  mode: las\n  thresholds: [20, 100000]\n  promote_knob: 0\n"+
		"  sibling_window: 600\n  preemption: {min_run: 3600}\n")
	// running is the task of the named array that runs, other than the
	// ones given: its job id, and its name for scancel (12_3: a task's
	// own id names, to scancel, an array of that id).
	type task struct {
		id   uint32
		name string
	}
	running := func(array string, not ...uint32) task {
		var got task
		e.eventually(30*time.Second, "a task of "+array+" to run", func() (bool, string) {
			out, err := e.c.Run("squeue", "-h", "-t", "running", "-n", array, "-o", "%A|%i")
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Fields(out) {
				var id uint32
				var name string
				if _, err := fmt.Sscanf(strings.Replace(line, "|", " ", 1), "%d %s", &id, &name); err == nil && !slices.Contains(not, id) {
					got = task{id, name}
					return true, ""
				}
			}
			return false, out
		})
		return got
	}
	cancelSunk := func(tk task) int64 {
		p := e.waitQueue(tk.id, 1, 60*time.Second)
		if out, err := e.c.RunAs(testUser, "scancel", tk.name); err != nil {
			t.Fatalf("scancel %s: %v %s", tk.name, err, out)
		}
		e.waitState(tk.id, "CANCELLED", 30*time.Second)
		return p.Service
	}
	inherited := func(id uint32) bool {
		return e.logMatches(fmt.Sprintf(`job inherits the attained service .*job_id=%d\b`, id))
	}

	e.submitAs("--array=0-2%1", "-J", "train", "--gpus=2", "--wrap", "sleep 600")
	prev := running("train")
	for range 2 {
		last := cancelSunk(prev)
		next := running("train", prev.id)
		var p slurmcluster.Prio
		deadline := time.Now().Add(8 * time.Second)
		for time.Now().Before(deadline) {
			if p = e.prio()[next.id]; inherited(next.id) && p.Queue == 1 && p.Service >= last {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !inherited(next.id) || p.Queue != 1 || p.Service < last {
			t.Errorf("task %s, let go as task %s was cancelled in queue 1 with %d GPU-s: queue %d with %d GPU-s (logged: %v)",
				next.name, prev.name, last, p.Queue, p.Service, inherited(next.id))
		}
		prev = next
	}

	e.submitAs("--array=0-3%2", "-J", "lr", "--gpus=1", "--wrap", "sleep 600")
	a := running("lr")
	b := running("lr", a.id)
	cancelSunk(a)
	c := running("lr", a.id, b.id)
	e.waitPasses(3)
	if inherited(c.id) {
		t.Errorf("task %s of a sweep throttled to two inherited the service of its sibling %s, cancelled", c.name, a.name)
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is down")
	}
}
