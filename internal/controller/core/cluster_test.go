package core

import (
	"errors"
	"path/filepath"
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
