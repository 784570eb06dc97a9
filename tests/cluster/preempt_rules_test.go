package cluster_test

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Who may take whose GPUs, and what an admin sees when the preemption rule
// says no (issue 26 items 4-7 and 10, issue 20 items 3 and 7).

// demotedYAML: one threshold at 20 GPU-s, no promotions, no min_run.
const demotedYAML = "tiresias:\n  mode: las\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: 0}\n"

// asUser runs a command as the unprivileged test user, as someone with a
// login on the cluster would.
func (e *env) asUser(name string, args ...string) string {
	e.t.Helper()
	out, err := e.c.Run("runuser", append([]string{"-u", testUser, "--", name}, args...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) restarts(id uint32) int {
	e.t.Helper()
	d, err := e.c.ShowJob(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d.Restarts
}

// triedAndWaits waits until Slurm has tried job id and left it waiting
// for resources (a try is when it would have preempted), then polls a
// little longer: the job must stay pending.
func (e *env) triedAndWaits(id uint32) {
	e.t.Helper()
	e.eventually(60*time.Second, fmt.Sprintf("Slurm to try job %d", id), func() (bool, string) {
		j := e.jobs()[id]
		return j.State != "PENDING" || j.Reason == "Resources" || strings.HasPrefix(j.Reason, "Lachesis: "), fmt.Sprintf("%+v", j)
	})
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		if j := e.jobs()[id]; j.State != "PENDING" {
			e.t.Fatalf("job %d %s; want it left waiting", id, j.State)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Issue 26 item 5: a job of a partition with a lower PriorityTier never
// preempts one of a higher tier; a job of the same tier still does.
func TestLowerTierJobDoesNotPreemptHigherTierJob(t *testing.T) {
	e := startCluster(t, 1, demotedYAML,
		"PartitionName=urgent Nodes=ALL PriorityTier=10 MaxTime=INFINITE State=UP")
	urgent := e.submit("-p", "urgent", "-J", "urgent", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(urgent, "RUNNING", 30*time.Second)
	e.waitQueue(urgent, 1, 40*time.Second)

	low := e.submit("-p", "gpu", "-J", "low", "--gpus=1", "--wrap", "sleep 600")
	e.triedAndWaits(low)
	if r := e.restarts(urgent); r != 0 || e.jobs()[urgent].State != "RUNNING" {
		t.Fatalf("urgent job: %s, %d restarts; want it running, never preempted by a tier-1 job", e.jobs()[urgent].State, r)
	}

	// The rule holds only across tiers: an urgent job of queue 0 does
	// preempt it.
	peer := e.submit("-p", "urgent", "-J", "peer", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(peer, "RUNNING", 60*time.Second)
	if r := e.restarts(urgent); r != 1 {
		t.Fatalf("urgent job restarts %d after an urgent job of queue 0 came; want 1", r)
	}
}

// arrayJobs maps each job id of array jobID (squeue's %A, a task's own job
// id) to its state.
func (e *env) arrayJobs(arrayID uint32) map[uint32]string {
	e.t.Helper()
	out, err := e.c.Run("squeue", "-h", "-t", "all", "-o", "%A|%i|%T")
	if err != nil {
		e.t.Fatal(err)
	}
	jobs := map[uint32]string{}
	prefix := strconv.Itoa(int(arrayID)) + "_"
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 || !strings.HasPrefix(f[1], prefix) {
			continue
		}
		id, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			e.t.Fatalf("squeue line %q", line)
		}
		jobs[uint32(id)] = f[2]
	}
	return jobs
}

// Issue 26 item 6: a job array's waiting tasks never requeue its own
// running tasks; another user's job of queue 0 still preempts them.
func TestArrayTasksDoNotPreemptEachOther(t *testing.T) {
	e := startCluster(t, 1, demotedYAML)
	array := e.submit("-J", "sweep", "--array=0-1", "--gpus=4", "--wrap", "sleep 600")
	var first uint32
	e.eventually(30*time.Second, "the array's first task to run", func() (bool, string) {
		tasks := e.arrayJobs(array)
		for id, st := range tasks {
			if st == "RUNNING" {
				first = id
			}
		}
		return first != 0, fmt.Sprintf("%v", tasks)
	})
	e.waitQueue(first, 1, 40*time.Second)
	// The pending task (queue 0) is tried while the running one sits in
	// queue 1: before this rule, it requeued it within a pass.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if r := e.restarts(first); r != 0 {
			t.Fatalf("the array's running task %d was requeued %d times by its own array", first, r)
		}
		time.Sleep(time.Second)
	}
	other := e.submit("-J", "other", "--gpus=1", "--wrap", "sleep 600")
	// (squeue's array rows are not e.jobs()'s: scontrol it is.)
	e.eventually(60*time.Second, "the plain job to run", func() (bool, string) {
		d, err := e.c.ShowJob(other)
		return err == nil && d.State == "RUNNING", fmt.Sprintf("%s %v", d.State, err)
	})
	if r := e.restarts(first); r != 1 {
		t.Fatalf("array task restarts %d after a plain job of queue 0 came; want 1", r)
	}
}

// Issue 26 item 4: of two demoted jobs of one queue, the one Slurm may
// requeue goes first even when the --no-requeue one ranks lower; when only
// the --no-requeue one will do, it is killed and the core logs it like a
// requeue, with its reason.
func TestRequeueableVictimGoesFirstAndAKillIsLogged(t *testing.T) {
	e := startCluster(t, 1, demotedYAML)
	requeueable := e.submit("-J", "requeueable", "--gpus=2", "--wrap", "sleep 600")
	e.waitQueue(requeueable, 1, 40*time.Second)
	// Enters queue 1 later, so it ranks lower there: by rank alone it is
	// the first victim.
	noRequeue := e.submit("-J", "norequeue", "--no-requeue", "--gpus=2", "--wrap", "sleep 600")
	e.waitQueue(noRequeue, 1, 40*time.Second)

	first := e.submit("-J", "first", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(first, "RUNNING", 60*time.Second)
	j := e.jobs()
	if j[noRequeue].State != "RUNNING" || j[requeueable].State != "PENDING" {
		t.Fatalf("after one preemption: --no-requeue job %s, requeueable job %s; want the requeueable one requeued",
			j[noRequeue].State, j[requeueable].State)
	}

	second := e.submit("-J", "second", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(second, "RUNNING", 60*time.Second)
	pattern := fmt.Sprintf(`lachesis: job preempted job_id=%d preemptor_job_id=%d .*outcome=killed reason="preempted by job %d `,
		noRequeue, second, second)
	e.eventually(20*time.Second, "the core to log the kill with its reason", func() (bool, string) {
		return e.logMatches(pattern), ""
	})
}

// Issue 26 item 7: while min_run keeps a demoted job's GPUs, the waiting
// job says why (squeue's reason) and slurmctld's log names the rule and
// both jobs.
func TestPreemptionBlockedByMinRunIsVisible(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: 300}\n")
	long := e.submit("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	e.waitQueue(long, 1, 40*time.Second)
	short := e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 600")
	want := fmt.Sprintf("Lachesis: may preempt job %d when its run reaches min_run (", long)
	e.eventually(60*time.Second, "squeue to show why the short job waits", func() (bool, string) {
		j := e.jobs()[short]
		return strings.HasPrefix(j.Reason, want) && strings.HasSuffix(j.Reason, " of 300 s)"), fmt.Sprintf("%+v", j)
	})
	e.eventually(20*time.Second, "the log to name the rule and the jobs", func() (bool, string) {
		return e.logMatches(fmt.Sprintf(`lachesis: preemption blocked rule=min_run preemptor_job_id=%d job_id=%d `, short, long)), ""
	})
	if e.jobs()[long].State != "RUNNING" {
		t.Fatal("the long job was preempted under min_run")
	}
}

// logTime is the time of the first slurmctld log line matching pattern.
func (e *env) logTime(pattern string) (time.Time, bool) {
	re := regexp.MustCompile(`(?m)^\[([0-9T:.-]+)\] .*` + pattern)
	m := re.FindStringSubmatch(e.c.ControllerLog())
	if m == nil {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation("2006-01-02T15:04:05.000", m[1], time.Local)
	return at, err == nil
}

// Issue 26 item 10: a preempted run is charged up to the preemption, not
// to the last pass before it. Passes here are 10 s apart and the
// preemption comes about 5 s after one, so charging to the last pass
// would lose about 20 GPU-s.
func TestPreemptedRunIsChargedToThePreemption(t *testing.T) {
	e := startCluster(t, 1, demotedYAML)
	yaml := strings.Replace(tiresiasYAML(e.dir, demotedYAML), "pass_interval: 1\n", "pass_interval: 10\n", 1)
	if err := e.c.WriteLachesisYAML(yaml); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	long := e.submit("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	d, err := e.c.ShowJob(long)
	if err != nil {
		t.Fatal(err)
	}
	var demoted time.Time
	e.eventually(40*time.Second, "a pass to demote the long job", func() (bool, string) {
		var ok bool
		demoted, ok = e.logTime(fmt.Sprintf(`job changed queue job_id=%d queue=1 `, long))
		return ok, ""
	})
	// Halfway between two passes (the one that demoted it and the next).
	time.Sleep(time.Until(demoted.Add(5 * time.Second)))
	short := e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(short, "RUNNING", 30*time.Second)
	var preempted time.Time
	e.eventually(10*time.Second, "Slurm's log of the preemption", func() (bool, string) {
		var ok bool
		preempted, ok = e.logTime(fmt.Sprintf(`preempted JobId=%d has been requeued`, long))
		return ok, ""
	})
	ran := float64(preempted.Unix() - d.StartTime.Unix())
	e.eventually(30*time.Second, "the ledger to close the run", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return !r.RunOpen && r.Runs == 1 && r.ServiceClosed > 0, fmt.Sprintf("%+v", r)
	})
	r, _ := e.ledgerRecord(long)
	// Slurm's times are whole seconds: within one second of 4 GPUs.
	if math.Abs(r.ServiceClosed-4*ran) > 4 {
		t.Fatalf("run charged %v GPU-s; Slurm ran it %v s on 4 GPUs (%v GPU-s)", r.ServiceClosed, ran, 4*ran)
	}
	if r.Preemptions != 1 {
		t.Fatalf("ledger counts %d preemptions, want 1", r.Preemptions)
	}
}

// Issue 20 item 3: a job's owner who holds their running job (priority 0,
// which Slurm allows) does not make it immune to preemption, and the hold
// they asked for stays.
func TestOwnersHoldOnARunningJobDoesNotBlockPreemption(t *testing.T) {
	e := startCluster(t, 1, demotedYAML)
	long := e.submitAs("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	e.waitQueue(long, 1, 40*time.Second)
	e.asUser("scontrol", "hold", strconv.Itoa(int(long)))
	e.eventually(10*time.Second, "the hold to take", func() (bool, string) {
		j := e.jobs()[long]
		return j.Priority == 0 && j.State == "RUNNING", fmt.Sprintf("%+v", j)
	})
	// Two passes see the held running job (each adds to its open run).
	held, _ := e.ledgerRecord(long)
	e.eventually(20*time.Second, "two passes after the hold", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return r.RunSeconds >= held.RunSeconds+2, fmt.Sprintf("%+v", r)
	})
	short := e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(short, "RUNNING", 60*time.Second)
	if r := e.restarts(long); r != 1 {
		t.Fatalf("held running job restarts %d, want 1", r)
	}
	if p := e.jobs()[long].Priority; p != 0 {
		t.Fatalf("the owner's hold became priority %d", p)
	}
}

// Issue 20 item 7: requeues a job's owner asks for are not preemptions:
// they do not spend the job's max_per_job budget.
func TestOwnersRequeueDoesNotSpendThePreemptionBudget(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  mode: las\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: 0, max_per_job: 1}\n")
	long := e.submitAs("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	// A pass sees the first run before the owner requeues it: a run that
	// starts and is requeued between two passes is never seen (24.11's
	// backfill started the job half a second before the requeue).
	e.eventually(10*time.Second, "a pass to see the first run", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return r.RunOpen && r.Runs == 1, fmt.Sprintf("%+v", r)
	})
	e.asUser("scontrol", "requeue", strconv.Itoa(int(long)))
	e.eventually(60*time.Second, "the job to run again", func() (bool, string) {
		j := e.jobs()[long]
		return j.State == "RUNNING" && e.restarts(long) == 1, fmt.Sprintf("%+v", j)
	})
	e.waitQueue(long, 1, 40*time.Second)
	e.eventually(10*time.Second, "the ledger to count a second run, no preemption", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return r.Runs == 2 && r.Preemptions == 0, fmt.Sprintf("%+v", r)
	})
	short := e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(short, "RUNNING", 60*time.Second)
	if r := e.restarts(long); r != 2 {
		t.Fatalf("long job restarts %d, want 2 (its owner's requeue, then a preemption)", r)
	}
	e.eventually(20*time.Second, "the ledger to count the preemption", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return r.Preemptions == 1, fmt.Sprintf("%+v", r)
	})
}
