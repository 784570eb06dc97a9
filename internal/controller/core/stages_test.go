package core

import (
	"path/filepath"
	"testing"
)

// Each stage of a pass on its own, with c.mu held as Pass holds it.

func TestAccountStageCollectsRankableJobsAndSkipsHeldAndFinished(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	snaps := []Snapshot{
		running(1, 2, 100, 110),
		pending(2, 1, 105),
		{ID: 3, State: StatePending, GPUs: 1, SubmitTime: 106, Held: true},
		{ID: 4, State: StateFinished, GPUs: 1, SubmitTime: 90, StartTime: 95, EndTime: 120},
	}
	out := make([]Decision, len(snaps))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.account(130, snaps, out)
	if len(c.jobs) != 2 || c.jobs[0].ID != 1 || c.jobs[1].ID != 2 {
		t.Fatalf("rankable jobs %+v, want jobs 1 and 2", c.jobs)
	}
	if got := c.records[1].Total(); got != 40 {
		t.Errorf("job 1 service %v, want 2 GPUs × 20 s = 40", got)
	}
	if _, ok := c.records[4]; ok {
		t.Error("a finished job's record is still active")
	}
	if _, ok := c.records[3]; !ok {
		t.Error("a held job's record is not kept")
	}
}

func TestRankStageFoldsDemotionIntoRecordAndDecision(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	snaps := []Snapshot{running(1, 4, 100, 100), pending(2, 1, 150)}
	out := make([]Decision, len(snaps))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.account(130, snaps, out) // 4 GPUs × 30 s = 120 ≥ the 100 GPU-s threshold
	c.rank(130, snaps, out)
	if q := c.records[1].Queue; q != 1 {
		t.Errorf("job 1 in queue %d, want 1 (demoted)", q)
	}
	if out[0].Queue != 1 || out[1].Queue != 0 || out[1].Priority <= out[0].Priority {
		t.Errorf("decisions %+v; want the new job above the demoted one", out)
	}
}

func TestForgetStageFinishesJobsSlurmctldNoLongerHas(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 100, running(1, 1, 90, 95), pending(2, 1, 99))
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.seen)
	c.seen[2] = true // job 1 was purged between passes
	c.forget(110)
	if _, ok := c.records[1]; ok {
		t.Error("job 1 is still active after slurmctld dropped it")
	}
	if _, ok := c.decisions[1]; ok {
		t.Error("job 1 still has a decision")
	}
	if _, ok := c.records[2]; !ok {
		t.Error("job 2 was forgotten although slurmctld still has it")
	}
}
