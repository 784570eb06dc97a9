package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// Two leaf switches of two 4-GPU nodes each, as the cluster test's
// topology.conf has them (n0 and n2 under s1: the table's order is not
// the switches').
var (
	fourNodes = []ClusterNode{{Name: "n0", GPUs: 4, Index: 0}, {Name: "n1", GPUs: 4, Index: 1},
		{Name: "n2", GPUs: 4, Index: 2}, {Name: "n3", GPUs: 4, Index: 3}, {Name: "login", Index: 4}}
	twoSwitches = []slurmcmd.Leaf{{Name: "s1", Nodes: []string{"n0", "n2"}}, {Name: "s2", Nodes: []string{"n1", "n3"}}}
)

func nodesQuotaCore(t *testing.T, now *int64, accounts string, maxPerPass int) (*Core, interface{ String() string }) {
	t.Helper()
	specs := map[string]quota.Spec{}
	for _, a := range strings.Split(accounts, ";") {
		name, text, _ := strings.Cut(a, "=")
		s, err := quota.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		specs[name] = s
	}
	c, logged := ruleCore(t, now, func(cfg *config.Config) {
		cfg.Quota = config.Quota{Accounts: specs, MaxReclaimPerPass: maxPerPass}
	})
	return c, logged
}

// The quotas are bound to the nodes as one switch until the switches are
// read, then again under them: "2 nodes of 4 GPUs" lies under one leaf
// switch (the log names it); a quota that fits the nodes but no switch is
// logged naming its key and each switch's unbound nodes, and the quotas
// keep their binding; a reconfigure to it is refused, naming the same.
func TestQuotaNodesBindUnderOneLeafSwitch(t *testing.T) {
	now := int64(1000)
	c, logged := nodesQuotaCore(t, &now, "own=2 nodes of 4 GPUs", 4)
	if err := c.SetCluster(fourNodes); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "quota cells bound\" account=own quota=\"2 nodes of 4 GPUs under one switch\" cell_switch=cluster") {
		t.Fatalf("before the switches are read, no binding to the nodes as one switch logged:\n%s", logged)
	}
	c.applyTopology(twoSwitches)
	if !strings.Contains(logged.String(), "quota cells bound\" account=own quota=\"2 nodes of 4 GPUs under one switch\" cell_switch=s1 nodes=n0,n2 cells=2 source=switches") {
		t.Fatalf("own's nodes are not bound under s1:\n%s", logged)
	}

	// Three 2-node quotas: 12 GPUs fit 16, but only two switches of two.
	bad := []slurmcmd.Leaf{{Name: "s1", Nodes: []string{"n0"}}, {Name: "s2", Nodes: []string{"n1", "n2", "n3"}}}
	c2, logged2 := nodesQuotaCore(t, &now, "own=2 nodes of 4 GPUs;big=2 nodes of 4 GPUs", 4)
	if err := c2.SetCluster(fourNodes); err != nil {
		t.Fatal(err)
	}
	before := c2.cluster.binding
	c2.applyTopology(bad)
	want := "quota.accounts.own (2 nodes of 4 GPUs under one switch): bad cell topology: no leaf switch has 2 unbound nodes of 4 GPUs (unbound nodes of 4 GPUs per switch: s1 1, s2 1)"
	if !strings.Contains(logged2.String(), "the quotas do not fit the cluster's switches; they keep their binding") ||
		!strings.Contains(logged2.String(), want) {
		t.Fatalf("the misfit under the switches is not logged naming the key and the switches:\n%s", logged2)
	}
	if c2.cluster.binding != before {
		t.Fatal("a binding that does not fit the switches replaced the one in force")
	}

	// A reconfigure is judged against the switches read.
	c.configPath = t.TempDir() + "/lachesis.yaml"
	c.topo.leaves = bad
	writeFile(t, c.configPath, "quota:\n  accounts: {own: 2 nodes of 4 GPUs, big: 2 nodes of 4 GPUs}\n")
	err := c.Reconfigure()
	if !errors.Is(err, ErrQuotaUnfit) || !strings.Contains(err.Error(), "no leaf switch has 2 unbound nodes of 4 GPUs") {
		t.Fatalf("Reconfigure = %v, want a refusal naming the switches", err)
	}
	if len(c.Config().Quota.Accounts) != 1 {
		t.Fatalf("the refused quotas were taken: %v", c.Config().Quota.Accounts)
	}
}

// Without topology/tree the nodes stay one switch, said once.
func TestQuotaWithoutSwitchesSaysSoOnce(t *testing.T) {
	now := int64(1000)
	c, logged := nodesQuotaCore(t, &now, "own=2 nodes of 4 GPUs", 4)
	if err := c.SetCluster(fourNodes); err != nil {
		t.Fatal(err)
	}
	c.applyTopology(nil)
	c.applyTopology(nil)
	if n := strings.Count(logged.String(), "has no topology/tree switches"); n != 1 {
		t.Fatalf("said %d times, want once:\n%s", n, logged)
	}
}

// topologyStub answers reads: first a failure, then the leaves.
type topologyStub struct {
	mu    sync.Mutex
	calls int
}

func (s *topologyStub) Topology(context.Context) ([]slurmcmd.Leaf, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls++; s.calls == 1 {
		return nil, fmt.Errorf("slurm_load_topo error: Unable to contact slurm controller")
	}
	return twoSwitches, nil
}

// The reader runs apart from the plugin's calls: asked by the first node
// table, it retries until slurmctld answers, then binds the quotas under
// the switches.
func TestQuotaTopologyIsReadApartAndRetried(t *testing.T) {
	now := int64(1000)
	c, logged := nodesQuotaCore(t, &now, "own=2 nodes of 4 GPUs", 4)
	stub := &topologyStub{}
	c.startTopology(stub)
	if err := c.SetCluster(fourNodes); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		bound := c.topo.read && c.cluster.binding != nil && c.cluster.binding.switches[0] == "s1"
		c.mu.Unlock()
		if bound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the switches were not read and bound:\n%s", logged)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logged.String(), "cannot read slurmctld's topology") {
		t.Errorf("the failed read is not logged:\n%s", logged)
	}
}

func onNodes(s Snapshot, nodes ...int32) Snapshot {
	s.FirstNode, s.NodeCount, s.Nodes = nodes[0], uint32(len(nodes)), nodes
	return s
}

// An owner's job of two whole nodes reclaims the nodes of its quota under
// its switch (s1: n0 and n2), though the borrowers under s2 would lose
// less; a borrower on several nodes is a victim with both its nodes known.
func TestQuotaReclaimOfSeveralNodesStaysUnderTheQuotasSwitch(t *testing.T) {
	now := int64(2000)
	c, logged := nodesQuotaCore(t, &now, "own=2 nodes of 4 GPUs", 8)
	if err := c.SetCluster(fourNodes); err != nil {
		t.Fatal(err)
	}
	c.applyTopology(twoSwitches)
	slurm := &requeueRecorder{}
	pass(c, now,
		onNodes(requeueable(inAccount(running(1, 8, 100, 1900), "other")), 0, 2), // 800 GPU-s on s1
		onNodes(requeueable(inAccount(running(2, 4, 100, 1990), "other")), 1),    // 40 GPU-s on s2
		onNodes(requeueable(inAccount(running(3, 4, 100, 1990), "other")), 3),    // 40 GPU-s on s2
		waitsForGPUs(requeueable(inAccount(pending(5, 8, 1990), "own"))),
	)
	c.sharing.CarryOutQueued(slurm)
	if !slices.Equal(slurm.requeued, []uint32{1}) {
		t.Fatalf("requeued %v, want [1]: the borrower on own's nodes under s1, not s2's", slurm.requeued)
	}
	if !strings.Contains(logged.String(), "job_id=1 ") || !strings.Contains(logged.String(), "cell_node=n0,n2 cell_switch=s1") {
		t.Fatalf("the reclaim line does not name the nodes and the switch freed:\n%s", logged)
	}
}

// A borrower on several nodes is a candidate in each node's room: an
// owner of one node's GPUs evicts it when it is the cheapest way to a
// whole node (before, its nodes unknown, it was never a victim).
func TestQuotaReclaimTakesABorrowerOfSeveralNodes(t *testing.T) {
	now := int64(2000)
	c, _ := nodesQuotaCore(t, &now, "own=1 node of 4 GPUs", 8)
	if err := c.SetCluster(fourNodes[:2]); err != nil {
		t.Fatal(err)
	}
	slurm := &requeueRecorder{}
	pass(c, now,
		onNodes(requeueable(inAccount(running(1, 4, 100, 1990), "other")), 0, 1), // 40 GPU-s, 2+2
		onNodes(requeueable(inAccount(running(2, 2, 100, 1000), "other")), 0),    // 2000 GPU-s
		onNodes(requeueable(inAccount(running(3, 2, 100, 1000), "other")), 1),    // 2000 GPU-s
		waitsForGPUs(requeueable(inAccount(pending(5, 4, 1990), "own"))),
	)
	c.sharing.CarryOutQueued(slurm)
	if !slices.Equal(slurm.requeued, []uint32{1, 2}) && !slices.Equal(slurm.requeued, []uint32{2, 1}) &&
		!slices.Equal(slurm.requeued, []uint32{1, 3}) && !slices.Equal(slurm.requeued, []uint32{3, 1}) {
		t.Fatalf("requeued %v, want the two-node borrower and one node's other borrower", slurm.requeued)
	}
}

func TestCombos(t *testing.T) {
	var got []string
	combos(4, 2, 100, func(p []int) { got = append(got, fmt.Sprint(p)) })
	if s := strings.Join(got, " "); s != "[0 1] [0 2] [0 3] [1 2] [1 3] [2 3]" {
		t.Fatalf("got %s", s)
	}
	got = nil
	combos(30, 15, 5, func(p []int) { got = append(got, fmt.Sprint(p)) })
	if len(got) != 5 {
		t.Fatalf("%d choices past the bound of 5", len(got))
	}
	combos(2, 3, 5, func([]int) { t.Fatal("3 of 2") })
}
