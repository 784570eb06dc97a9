package core

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/quota"
)

// The quotas are bound to the shape slurmctld sends: one that the nodes
// cannot hold is refused naming its key, at the first shape and at a
// reconfigure (which then keeps the previous config); without quotas any
// shape is taken.
func TestClusterBindsQuotas(t *testing.T) {
	dir := t.TempDir()
	c := openCore(t, filepath.Join(dir, "l.db"))
	defer c.Close()
	c.configPath = filepath.Join(dir, "lachesis.yaml")
	two := []ClusterNode{{Name: "n0", GPUs: 4}, {Name: "n1", GPUs: 4}, {Name: "login", GPUs: 0}}
	if err := c.SetCluster(two); err != nil {
		t.Fatalf("no quotas, yet the shape was refused: %v", err)
	}

	writeFile(t, c.configPath, "quota:\n  accounts: {own: 1 node of 4 GPUs, big: 2 nodes of 4 GPUs}\n")
	err := c.Reconfigure()
	if !errors.Is(err, ErrQuotaUnfit) || !strings.Contains(err.Error(), "quota.accounts.own") {
		t.Fatalf("12 GPUs of quota on 8: Reconfigure = %v, want a refusal naming quota.accounts.own", err)
	}
	if len(c.Config().Quota.Accounts) != 0 {
		t.Fatalf("the refused quotas were taken: %v", c.Config().Quota.Accounts)
	}
	writeFile(t, c.configPath, "quota:\n  accounts: {own: 1 node of 4 GPUs}\n")
	if err := c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	if c.cluster.binding.GPUs("own") != 4 {
		t.Fatalf("own's quota is not bound: %+v", c.cluster.binding)
	}
	// A shape that shrank below the quotas is refused; the binding stays.
	err = c.SetCluster([]ClusterNode{{Name: "n0", GPUs: 2}})
	if !errors.Is(err, ErrQuotaUnfit) || !strings.Contains(err.Error(), "quota.accounts.own") {
		t.Fatalf("a 4-GPU quota on a 2-GPU node: %v", err)
	}
	if c.cluster.binding == nil || len(c.cluster.nodes) != 3 {
		t.Fatalf("the refused shape replaced the bound one: %+v", c.cluster)
	}
	if again := c.SetCluster([]ClusterNode{{Name: "n0", GPUs: 2}}); again != err {
		t.Fatalf("the same refused shape again: %v, want the remembered %v", again, err)
	}
	if err := c.SetCluster([]ClusterNode{{Name: strings.Repeat("x", MaxNodeNameLen+1), GPUs: 4}}); err == nil {
		t.Fatal("an over-long node name was taken")
	}
}

// A first shape without GPUs cannot hold a quota.
func TestClusterWithoutGPUsRefusesQuotas(t *testing.T) {
	dir := t.TempDir()
	c := openCore(t, filepath.Join(dir, "l.db"))
	defer c.Close()
	c.cfg.Quota.Accounts = map[string]quota.Spec{"own": {Cells: 1, CellGPUs: 1}}
	if err := c.SetCluster([]ClusterNode{{Name: "n0"}}); !errors.Is(err, ErrQuotaUnfit) {
		t.Fatalf("SetCluster = %v, want ErrQuotaUnfit", err)
	}
}

func onNode(s Snapshot, node int32) Snapshot { s.FirstNode, s.NodeCount = node, 1; return s }

// Issue 35: with the cluster known, an owner's 4-GPU job reclaims a whole
// node: the borrowers of the node whose eviction loses the least work,
// even though two borrowers on different nodes would lose less (the old
// count in GPUs took those, leaving 4 GPUs free in pieces). Node 1 is
// left alone.
func TestQuotaReclaimFreesAWholeNode(t *testing.T) {
	now := int64(2000)
	c, logged := quotaCore(t, &now, 4)
	if err := c.SetCluster([]ClusterNode{{Name: "n0", GPUs: 4, Index: 0}, {Name: "n1", GPUs: 4, Index: 1}}); err != nil {
		t.Fatal(err)
	}
	slurm := &requeueRecorder{}
	pass(c, now,
		onNode(requeueable(inAccount(running(1, 2, 100, 1900), "other")), 0), // 200 GPU-s
		onNode(requeueable(inAccount(running(2, 2, 100, 1900), "other")), 0), // 200 GPU-s
		onNode(requeueable(inAccount(running(3, 2, 100, 1990), "other")), 1), // 20 GPU-s
		onNode(requeueable(inAccount(running(4, 2, 100, 1000), "other")), 1), // 2000 GPU-s
		waitsForGPUs(requeueable(inAccount(pending(5, 4, 1990), "own"))),
	)
	c.sharing.CarryOutQueued(slurm)
	slices.Sort(slurm.requeued)
	if !slices.Equal(slurm.requeued, []uint32{1, 2}) {
		t.Fatalf("requeued %v, want node n0's borrowers [1 2] (a whole cell)", slurm.requeued)
	}
	if !strings.Contains(logged.String(), "cell_node=n0") {
		t.Errorf("the reclaim log line does not name the node it frees:\n%s", logged)
	}
}
