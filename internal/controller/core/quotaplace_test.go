package core

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// exclSlurm is the requeuer's Slurm with every job pending and its
// ExcNodeList kept.
type exclSlurm struct {
	requeueRecorder
	lists map[uint32]string
}

func (s *exclSlurm) ExcNodeList(_ context.Context, job uint32) (string, bool, error) {
	return s.lists[job], true, nil
}

func (s *exclSlurm) SetExcNodeList(_ context.Context, job uint32, list string) error {
	s.lists[job] = list
	return nil
}

// twoNodeQuotaCore is a core with account own's quota one node of 4 GPUs
// on a cluster of two such nodes: quota.Bind binds n0.
func twoNodeQuotaCore(t *testing.T, now *int64) (*Core, *exclSlurm, *bytes.Buffer) {
	t.Helper()
	c, logged := quotaCore(t, now, 4)
	if err := c.SetCluster([]ClusterNode{{Name: "n0", GPUs: 4, Index: 0}, {Name: "n1", GPUs: 4, Index: 1}}); err != nil {
		t.Fatal(err)
	}
	if got := c.cluster.binding.Tree.NodeOwners(0); len(got) != 1 {
		t.Fatalf("own's cell is not n0: n0's owners %v", got)
	}
	return c, &exclSlurm{lists: map[uint32]string{}}, logged
}

// A borrower that fits on the unbound node is kept off own's idle node,
// beside the user's own ExcNodeList, with the reason logged and its quota
// state shown; once the unbound node is taken the steering no longer
// applies and the user's list comes back exactly as it was.
func TestQuotaBorrowerKeptOffIdleOwnerNodeWhileItFitsElsewhere(t *testing.T) {
	now := int64(2000)
	c, slurm, logged := twoNodeQuotaCore(t, &now)
	slurm.lists[1] = "x9"
	d := pass(c, now, requeueable(inAccount(pending(1, 2, 1990), "other")))
	c.sharing.CarryOutQueued(slurm)
	if got := slurm.lists[1]; got != "x9,n0" {
		t.Fatalf("the borrower's ExcNodeList is %q, want the user's x9 and own's idle n0", got)
	}
	if want := "[quota: other borrowing, kept off other accounts' idle cells]"; d[0].Quota != want {
		t.Errorf("quota segment %q, want %q", d[0].Quota, want)
	}
	if !strings.Contains(logged.String(), "job 1 kept off node n0: an idle quota cell of account own (a borrower of account other") {
		t.Errorf("no steering line in the log:\n%s", logged)
	}
	// The unbound node is taken: the borrower fits only on own's node now.
	now += 5
	d = pass(c, now,
		onNode(requeueable(inAccount(running(2, 4, 1000, 1900), "other")), 1),
		requeueable(inAccount(pending(1, 2, 1990), "other")),
	)
	c.sharing.CarryOutQueued(slurm)
	if !strings.Contains(logged.String(), "job 1 may run on node n0 again") {
		t.Errorf("the steering's end is not logged:\n%s", logged)
	}
	if got := slurm.lists[1]; got != "x9" {
		t.Fatalf("after the steering ended the ExcNodeList is %q, want the user's own x9", got)
	}
	if want := "[quota: other borrowing idle GPUs]"; d[1].Quota != want {
		t.Errorf("quota segment %q, want %q", d[1].Quota, want)
	}
	if want := "[quota: other borrowing unbound GPUs]"; d[0].Quota != want {
		t.Errorf("the running borrower's quota segment %q, want %q", d[0].Quota, want)
	}
}

// Borrowers are placed in rank order on what the earlier ones leave: the
// first fits on the unbound node and is kept off own's; the second no
// longer fits there and borrows own's idle node (no exclusion).
func TestQuotaBorrowersPlacedInTurnOnlyTheFirstIsKeptOff(t *testing.T) {
	now := int64(2000)
	c, slurm, _ := twoNodeQuotaCore(t, &now)
	pass(c, now,
		requeueable(inAccount(pending(1, 4, 1900), "other")),
		requeueable(inAccount(pending(2, 4, 1990), "other")),
	)
	c.sharing.CarryOutQueued(slurm)
	if got := slurm.lists[1]; got != "n0" {
		t.Errorf("the first borrower's ExcNodeList is %q, want n0", got)
	}
	if got, ok := slurm.lists[2]; ok {
		t.Errorf("the second borrower, which fits only on own's node, was kept off %q", got)
	}
}

// Within-quota jobs are never kept off, and their segment is sent once,
// until it changes.
func TestQuotaSegmentSentOnlyWhenItChanges(t *testing.T) {
	now := int64(2000)
	c, slurm, _ := twoNodeQuotaCore(t, &now)
	d := pass(c, now, requeueable(inAccount(pending(1, 4, 1990), "own")))
	c.sharing.CarryOutQueued(slurm)
	if want := "[quota: own within 4/4 GPUs]"; d[0].Quota != want {
		t.Fatalf("quota segment %q, want %q", d[0].Quota, want)
	}
	if _, ok := slurm.lists[1]; ok {
		t.Fatal("a within-quota job was kept off nodes")
	}
	now += 5
	if d = pass(c, now, onNode(requeueable(inAccount(running(1, 4, 1990, 2001), "own")), 0)); d[0].Quota != "" {
		t.Fatalf("an unchanged segment was sent again: %q", d[0].Quota)
	}
}

// A borrower Slurm holds once kept off (its partition may have no other
// node, which the core cannot see) has Lachesis's nodes lifted and is not
// kept off again once released: the hold and the lift do not alternate.
func TestQuotaBorrowerHeldWhileKeptOffIsNotKeptOffAgain(t *testing.T) {
	now := int64(2000)
	c, slurm, _ := twoNodeQuotaCore(t, &now)
	b := requeueable(inAccount(pending(1, 2, 1990), "other"))
	pass(c, now, b)
	c.sharing.CarryOutQueued(slurm)
	if got := slurm.lists[1]; got != "n0" {
		t.Fatalf("the borrower's ExcNodeList is %q, want n0", got)
	}
	now += 5
	held := b
	held.Held = true
	pass(c, now, held)
	c.sharing.CarryOutQueued(slurm)
	if got := slurm.lists[1]; got != "" {
		t.Fatalf("the held borrower's ExcNodeList is %q, want it lifted", got)
	}
	now += 5
	pass(c, now, b)
	if n := c.sharing.CarryOutQueued(slurm); n != 0 || slurm.lists[1] != "" {
		t.Fatalf("the released borrower was kept off again: %q (%d updates)", slurm.lists[1], n)
	}
}

// BenchmarkPassQuotaSteering measures what quotas cost a pass of 10000
// jobs on 1024 nodes of 8 GPUs (two accounts with 64 nodes each, a third
// borrowing; a quarter of the jobs running, one node each): quotas=off is
// the baseline, quotas=on adds classification, reclaim and the steering
// of up to 256 waiting borrowers with the quota segments.
func BenchmarkPassQuotaSteering(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("quotas=%v", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			now := int64(200000)
			c, _ := ruleCore(b, &now, func(cfg *config.Config) {
				if on {
					cfg.Quota = config.Quota{MaxReclaimPerPass: 4, Accounts: map[string]quota.Spec{
						"a": {Cells: 64, CellGPUs: 8}, "b": {Cells: 64, CellGPUs: 8}}}
				}
			})
			nodes := make([]ClusterNode, 1024)
			for i := range nodes {
				nodes[i] = ClusterNode{Name: fmt.Sprintf("n%d", i), GPUs: 8, Index: int32(i)}
			}
			if err := c.SetCluster(nodes); err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			snaps := make([]Snapshot, 10000)
			for i := range snaps {
				s := &snaps[i]
				s.ID, s.GPUs, s.SubmitTime = uint32(i+1), uint32(1<<rng.IntN(4)), int64(rng.IntN(100000))
				s.Account, s.RequeueAllowed = []string{"a", "b", "c"}[rng.IntN(3)], true
				if rng.IntN(4) == 0 {
					s.State, s.StartTime = StateRunning, s.SubmitTime+int64(rng.IntN(1000))
					s.FirstNode, s.NodeCount = int32(rng.IntN(len(nodes))), 1
				}
			}
			out := make([]Decision, len(snaps))
			c.Pass(now, snaps, out)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now += 30
				c.Pass(now, snaps, out)
			}
		})
	}
}
