package core

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// requeueRecorder is the requeuer's Slurm: it records requeues.
type requeueRecorder struct{ requeued []uint32 }

func (r *requeueRecorder) Requeue(_ context.Context, job uint32) error {
	r.requeued = append(r.requeued, job)
	return nil
}
func (r *requeueRecorder) ExcNodeList(context.Context, uint32) (string, bool, error) {
	return "", false, nil
}
func (r *requeueRecorder) SetExcNodeList(context.Context, uint32, string) error { return nil }
func (r *requeueRecorder) Cancel(context.Context, uint32) error                 { return nil }
func (r *requeueRecorder) Hostnames(context.Context, string) ([]string, error) {
	return nil, nil
}

func inAccount(s Snapshot, account string) Snapshot { s.Account = account; return s }

func waitsForGPUs(s Snapshot) Snapshot { s.WaitsForResources = true; return s }

func quotaCore(t *testing.T, now *int64, maxPerPass int) (*Core, *bytes.Buffer) {
	t.Helper()
	return ruleCore(t, now, func(cfg *config.Config) {
		cfg.Quota = config.Quota{Accounts: map[string]quota.Spec{"own": {Cells: 1, CellGPUs: 4}}, MaxReclaimPerPass: maxPerPass}
	})
}

// A within-quota job ranks above a borrower that waited longer; a
// borrower never takes a within-quota job's GPUs through Slurm's
// preemption, nor the owner a borrower's (the pass reclaims instead).
func TestQuotaRanksOwnersFirstAndKeepsSlurmsPreemptionOut(t *testing.T) {
	now := int64(1100)
	c, _ := quotaCore(t, &now, 8)
	d := pass(c, now,
		requeueable(inAccount(running(1, 2, 900, 1000), "own")),
		requeueable(inAccount(running(2, 2, 900, 1000), "other")),
		requeueable(inAccount(pending(3, 1, 100), "other")),
		requeueable(inAccount(pending(4, 1, 1090), "own")),
	)
	if d[3].Priority <= d[2].Priority {
		t.Fatalf("the owner's job has priority %d, the older borrower %d", d[3].Priority, d[2].Priority)
	}
	if c.Preemptable(3, 1) {
		t.Error("a borrower may preempt a job within its account's quota")
	}
	if c.Preemptable(4, 2) {
		t.Error("Slurm's preemption may take a borrower for an owner, past the reclaim bound")
	}
}

// The owner's job that Slurm found no GPUs for reclaims the cheaper
// borrower (less work lost), one per pass under max_reclaim_per_pass 1,
// says so in the victim's reason and the log, and a borrower's requeue
// under way is not chosen again.
func TestQuotaReclaimTakesTheCheaperBorrowerWithinTheBound(t *testing.T) {
	now := int64(2000)
	c, logged := quotaCore(t, &now, 1)
	slurm := &requeueRecorder{}
	snaps := []Snapshot{
		requeueable(inAccount(running(1, 1, 100, 1000), "other")), // 1000 GPU-s
		requeueable(inAccount(running(2, 1, 100, 1900), "other")), // 100 GPU-s
		requeueable(inAccount(running(3, 1, 100, 1500), "other")), // 500 GPU-s
		requeueable(inAccount(running(4, 1, 100, 1000), "own")),   // within
		waitsForGPUs(requeueable(inAccount(pending(5, 2, 1990), "own"))),
	}
	pass(c, now, snaps...)
	c.sharing.CarryOutQueued(slurm)
	if len(slurm.requeued) != 1 || slurm.requeued[0] != 2 {
		t.Fatalf("first pass requeued %v, want only the cheapest borrower 2", slurm.requeued)
	}
	// Next pass: job 2 is pending (requeued), 1 and 3 still run.
	now += 10
	snaps[1] = requeueable(inAccount(pending(2, 1, 100), "other"))
	d := pass(c, now, snaps...)
	c.sharing.CarryOutQueued(slurm)
	if len(slurm.requeued) != 2 || slurm.requeued[1] != 3 {
		t.Fatalf("second pass requeued %v, want 2 then 3", slurm.requeued)
	}
	want := "Lachesis: reclaimed by account own's job 5 (quota 4 GPUs, using 1)"
	if d[1].Blocked != want {
		t.Errorf("the victim's reason is %q, want %q", d[1].Blocked, want)
	}
	// Third pass: the owner still waits, two GPUs were freed for it.
	now += 10
	snaps[2] = requeueable(inAccount(pending(3, 1, 100), "other"))
	pass(c, now, snaps...)
	c.sharing.CarryOutQueued(slurm)
	if len(slurm.requeued) != 2 {
		t.Fatalf("a third pass requeued more: %v", slurm.requeued)
	}
	if !strings.Contains(logged.String(), `msg="quota reclaim" account=own preemptor_job_id=5 job_id=2`) {
		t.Errorf("no reclaim line in the log:\n%s", logged.String())
	}
}

// A reclaim that only jobs within their own quotas could feed is blocked
// and says why; nothing is requeued.
func TestQuotaReclaimBlockedSaysWhy(t *testing.T) {
	now := int64(2000)
	c, _ := ruleCore(t, &now, func(cfg *config.Config) {
		cfg.Quota = config.Quota{Accounts: map[string]quota.Spec{"own": {Cells: 1, CellGPUs: 2}, "b": {Cells: 1, CellGPUs: 2}},
			MaxReclaimPerPass: 4}
	})
	slurm := &requeueRecorder{}
	d := pass(c, now,
		requeueable(inAccount(running(1, 2, 100, 1000), "b")),
		waitsForGPUs(requeueable(inAccount(pending(2, 2, 1990), "own"))),
	)
	c.sharing.CarryOutQueued(slurm)
	if len(slurm.requeued) != 0 {
		t.Fatalf("requeued %v, a job within its own quota", slurm.requeued)
	}
	if !strings.HasPrefix(d[1].Blocked, "Lachesis: reclaim blocked: ") || !strings.Contains(d[1].Blocked, "within their own accounts' quotas") {
		t.Fatalf("the owner's reason: %q", d[1].Blocked)
	}
}

// Without a quota section nothing is classified and nothing reclaimed.
func TestNoQuotaNoReclaim(t *testing.T) {
	now := int64(2000)
	c, _ := ruleCore(t, &now, nil)
	slurm := &requeueRecorder{}
	pass(c, now,
		requeueable(inAccount(running(1, 1, 100, 1000), "other")),
		waitsForGPUs(requeueable(inAccount(pending(2, 2, 1990), "own"))),
	)
	if c.sharing.CarryOutQueued(slurm) != 0 || c.jobs[0].Quota != 0 {
		t.Fatal("quotas acted without a quota section")
	}
}
