package cluster_test

import (
	"fmt"
	"testing"
	"time"
)

// A sweep's finished member puts its sibling, submitted later, ahead of a
// job of no sweep in the same queue, across a kill -9 of slurmctld in
// between: the priority plugin hands the core the job's user, the core keys
// sweeps by user, account and GPU count, and the ledger keeps the ended
// member's key.
func TestFinishedSweepMemberRanksItsSiblingFirst(t *testing.T) {
	// min_run keeps every run to its end and fair share is off (the jobs'
	// accounts differ): only the order the index gives is under test.
	e := startCluster(t, 1, "tiresias:\n  mode: gittins\n  thresholds: [40, 100000]\n  promote_knob: 0\n"+
		"  sibling_window: 600\n  preemption: {min_run: 3600}\nfairshare:\n  enabled: false\n")
	first := e.submit("-A", "sweep", "-J", "lr-0.1", "--gpus=4", "--wrap", "sleep 3")
	e.waitState(first, "COMPLETED", 60*time.Second)

	// A crash after the first member ended: the sweep is rebuilt from the
	// ledger's completed-job history, not from memory.
	e.eventually(15*time.Second, "the ledger to hold the first member's end", func() (bool, string) {
		r, ok := e.ledgerRecord(first)
		return ok && r.Finished != 0, fmt.Sprintf("%+v", r)
	})
	time.Sleep(8 * time.Second) // slurmctld's own state save
	if err := e.c.KillController(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	if !e.logMatches(`sweeps restored from the completed-job history jobs=1`) {
		t.Fatalf("slurmctld's log does not show the sweep replayed:\n%s", e.c.ControllerLog())
	}

	blocker := e.submit("-A", "other", "-J", "blocker", "--gpus=4", "--wrap", "sleep 20")
	e.waitState(blocker, "RUNNING", 30*time.Second)
	solo := e.submit("-A", "solo", "-J", "solo", "--gpus=4", "--wrap", "sleep 1")
	sibling := e.submit("-A", "sweep", "-J", "lr-0.2", "--gpus=4", "--wrap", "sleep 20")

	// Same queue, no service: FIFO would put solo first. The sibling's
	// sweep says it ends within a few GPU-seconds.
	e.eventually(20*time.Second, "the sibling ranked above the earlier job of no sweep", func() (bool, string) {
		j := e.jobs()
		return j[sibling].Priority > j[solo].Priority,
			fmt.Sprintf("sibling %+v, solo %+v", j[sibling], j[solo])
	})
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
