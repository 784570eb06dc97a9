package cluster_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// A sweep's finished member puts its sibling ahead of a job of no sweep
// that entered the queue earlier, across a kill -9 of slurmctld in between:
// the priority plugin hands the core the job's user, the core keys sweeps by
// user, account and GPU count, and the ledger keeps the ended member's key.
// Both waiting jobs have run a little (a job that has not run is ranked by
// the cluster's history, so a throw-away job cannot lift a whole sweep).
func TestFinishedSweepMemberRanksItsSiblingFirst(t *testing.T) {
	// One queue, no preemption (min_run), no fair share (the accounts
	// differ): only the order the index gives is under test.
	e := startCluster(t, 1, "tiresias:\n  mode: gittins\n  thresholds: [100000]\n  promote_knob: 0\n"+
		"  sibling_window: 600\n  preemption: {min_run: 3600}\nfairshare:\n  enabled: false\n")
	first := e.submit("-A", "sweep", "-J", "lr-0.1", "--gpus=4", "--wrap", "sleep 15")
	e.waitState(first, "COMPLETED", 60*time.Second)

	// A crash after the first member ended: the sweep is rebuilt from the
	// ledger's completed-job history, not from memory.
	e.eventually(15*time.Second, "the ledger to hold the first member's end", func() (bool, string) {
		r, ok := e.ledgerRecord(first)
		return ok && r.Finished != 0, fmt.Sprintf("%+v", r)
	})
	// slurmctld's own state save, asked for by the job's end.
	d, err := e.c.ShowJob(first)
	if err != nil {
		t.Fatal(err)
	}
	e.waitJobStateSaved(d.EndTime)
	if err := e.c.KillController(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	if !e.logMatches(`sweeps restored from the completed-job history jobs=1`) {
		t.Fatalf("slurmctld's log does not show the sweep replayed:\n%s", e.c.ControllerLog())
	}

	// solo runs a little, then waits (held); then the sibling does the
	// same, for less time. Over these few GPU-seconds the cluster's
	// history (the seed) gives the job with more service the higher index,
	// and solo also entered the queue first: without the sweep, solo ranks
	// first (checked by hand with sibling_window: 0).
	solo := e.submit("-A", "solo", "-J", "solo", "--gpus=4", "--wrap", "sleep 600")
	e.runThenHold(solo, 8)
	sibling := e.submit("-A", "sweep", "-J", "lr-0.2", "--gpus=4", "--wrap", "sleep 600")
	e.runThenHold(sibling, 4)
	blocker := e.submit("-A", "other", "-J", "blocker", "--gpus=4", "--wrap", "sleep 20")
	e.waitState(blocker, "RUNNING", 30*time.Second)
	if _, err := e.c.Run("scontrol", "release", fmt.Sprintf("%d,%d", solo, sibling)); err != nil {
		t.Fatal(err)
	}

	// The sibling, at a few GPU-seconds of the first member's 60, is about
	// to end by its sweep.
	e.eventually(20*time.Second, "the sibling ranked above the job of no sweep", func() (bool, string) {
		j := e.jobs()
		return j[sibling].Priority > j[solo].Priority,
			fmt.Sprintf("sibling %+v, solo %+v", j[sibling], j[solo])
	})
	p := e.prio()
	if p[sibling].Service == 0 || p[sibling].Service >= p[solo].Service || p[solo].Service >= 60 {
		t.Fatalf("service: sibling %d, solo %d GPU-s; want 0 < sibling < solo < 60", p[sibling].Service, p[solo].Service)
	}
	if !e.logMatches(fmt.Sprintf(`ranked inside its queue by its sweep.*job_id=%d completed_siblings=1`, sibling)) {
		t.Fatalf("slurmctld's log does not say why job %d moved:\n%s", sibling, e.c.ControllerLog())
	}
	if e.logMatches(fmt.Sprintf(`ranked inside its queue by its sweep.*job_id=%d\b`, solo)) {
		t.Fatalf("job %d, of no sweep, was ranked by one", solo)
	}
	// When the blocker ends, the sibling starts first.
	e.waitState(sibling, "RUNNING", 60*time.Second)
	if st := e.jobs()[solo].State; st != "PENDING" {
		t.Fatalf("solo job is %s while the sibling runs; want PENDING", st)
	}
}

// runThenHold waits until job id runs and has run about seconds, then
// requeues it held (scontrol requeuehold), so it waits with that service.
func (e *env) runThenHold(id uint32, seconds int) {
	e.t.Helper()
	e.waitState(id, "RUNNING", 30*time.Second)
	time.Sleep(time.Duration(seconds) * time.Second)
	if _, err := e.c.Run("scontrol", "requeuehold", strconv.Itoa(int(id))); err != nil {
		e.t.Fatal(err)
	}
	e.eventually(15*time.Second, fmt.Sprintf("job %d held with its service", id), func() (bool, string) {
		r, ok := e.ledgerRecord(id)
		return ok && r.Runs == 1 && r.RunStart == 0 && r.ServiceClosed > 0, fmt.Sprintf("%+v", r)
	})
}
