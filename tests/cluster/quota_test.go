package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// Issue 35 item 5: guaranteed quotas in slurmctld. One 4-GPU node, one
// Tiresias queue (so only the quota can reorder jobs), quotas from
// lachesis.yaml's quota section (the accounts need no slurmdbd).
func quotaYAML(accounts string, maxPerPass int) string {
	return fmt.Sprintf("tiresias:\n  mode: las\n  thresholds: [1000000]\n  promote_knob: 0\n"+
		"quota:\n  max_reclaim_per_pass: %d\n  accounts: {%s}\n", maxPerPass, accounts)
}

// An account within its quota starts ahead of a borrower that has waited
// longer: when the node frees, the owner's 2-GPU job starts and the
// borrower's 4-GPU job, first in line without quotas, waits. The node is
// held by a job that cannot be requeued, so no reclaim is involved.
func TestQuotaOwnerFirst(t *testing.T) {
	e := startCluster(t, 1, quotaYAML("own: 2 GPUs", 4))
	fill := e.submit("-A", "fill", "-J", "fill", "--gpus=4", "--no-requeue", "--wrap", "sleep 12")
	e.waitState(fill, "RUNNING", 30*time.Second)
	borrower := e.submit("-A", "other", "-J", "borrower", "--gpus=4", "--wrap", "sleep 5")
	time.Sleep(2 * time.Second) // the borrower waits longer
	owner := e.submit("-A", "own", "-J", "owner", "--gpus=2", "--wrap", "sleep 20")
	e.eventually(20*time.Second, "sprio to rank the owner above the borrower", func() (bool, string) {
		p := e.prio()
		return p[owner].Priority > p[borrower].Priority, fmt.Sprintf("owner %+v borrower %+v", p[owner], p[borrower])
	})
	e.waitState(owner, "RUNNING", 60*time.Second)
	if st := e.jobs()[borrower].State; st != "PENDING" {
		t.Fatalf("the borrower is %s while the owner runs; want it waiting behind the owner", st)
	}
}

// A borrower runs on idle quota and is requeued when the owner submits:
// of two borrowers the one with less run time (less work lost) is the
// victim, its reason says who reclaimed what, and the log names both.
func TestQuotaReclaimCheaper(t *testing.T) {
	e := startCluster(t, 1, quotaYAML("own: 4 GPUs", 4))
	older := e.submit("-A", "other", "-J", "older", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	e.waitState(older, "RUNNING", 30*time.Second)
	time.Sleep(8 * time.Second)
	younger := e.submit("-A", "other", "-J", "younger", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	e.waitState(younger, "RUNNING", 30*time.Second)
	time.Sleep(2 * time.Second)
	owner := e.submit("-A", "own", "-J", "owner", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(owner, "RUNNING", 90*time.Second)
	j := e.jobs()
	if j[older].State != "RUNNING" {
		t.Fatalf("the older borrower (more work lost) is %s; want it left running", j[older].State)
	}
	if e.restarts(younger) < 1 {
		t.Fatalf("the younger borrower was not requeued: %+v", j[younger])
	}
	if !e.logMatches(fmt.Sprintf(`quota reclaim account=own preemptor_job_id=%d job_id=%d victim_account=other quota_gpus=4 using_gpus=0 `, owner, younger)) {
		t.Error("slurmctld's log has no reclaim line naming the owner's job and the victim")
	}
	want := fmt.Sprintf("Lachesis: reclaimed by account own's job %d (quota 4 GPUs, using 0)", owner)
	e.eventually(60*time.Second, "the victim's reason to say who reclaimed it", func() (bool, string) {
		v := e.jobs()[younger]
		return v.Reason == want, fmt.Sprintf("%+v", v)
	})
}

// The reclaim bound holds: with max_reclaim_per_pass 1, an owner needing
// the GPUs of two borrowers requeues one per pass and both in the end.
func TestQuotaReclaimBound(t *testing.T) {
	e := startCluster(t, 1, quotaYAML("own: 4 GPUs", 1))
	b1 := e.submit("-A", "other", "-J", "b1", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	b2 := e.submit("-A", "other", "-J", "b2", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	e.waitState(b1, "RUNNING", 30*time.Second)
	e.waitState(b2, "RUNNING", 30*time.Second)
	owner := e.submit("-A", "own", "-J", "owner", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(owner, "RUNNING", 120*time.Second)
	var at []time.Time
	for _, v := range []uint32{b1, b2} {
		if e.restarts(v) < 1 {
			t.Fatalf("borrower %d was not requeued", v)
		}
		when, ok := e.logTime(fmt.Sprintf(`quota reclaim account=own preemptor_job_id=%d job_id=%d `, owner, v))
		if !ok {
			t.Fatalf("no reclaim line for borrower %d", v)
		}
		at = append(at, when)
	}
	gap := at[0].Sub(at[1]).Abs()
	if gap < 500*time.Millisecond {
		t.Fatalf("both borrowers were reclaimed in one pass (%v apart); the bound is 1 per pass", gap)
	}
	if n := len(regexp.MustCompile(`quota reclaim account=own `).FindAllString(e.c.ControllerLog(), -1)); n != 2 {
		t.Fatalf("%d reclaims logged, want exactly 2", n)
	}
}

// A quota the real cluster cannot hold stops slurmctld at its start
// naming the key, as a bad lachesis.yaml does: "own: 2 nodes of 4 GPUs"
// on one 4-GPU node. The text itself is valid, so only the node table
// (sent to the core before the first pass) can refuse it.
func TestQuotaUnfitStopsSlurmctldNamingTheKey(t *testing.T) {
	parallelUnlessAlone(t)
	dir := filepath.Join(testDirRoot, "QuotaUnfit")
	os.RemoveAll(dir)
	fragment, err := os.ReadFile(filepath.Join(repoRoot, "etc", "slurm.conf.lachesis"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := slurmcluster.Up(t.Context(), repoRoot, slurmcluster.Options{
		Dir: dir, Nodes: 1, GPUsPerNode: 4, PortBase: reservePortBlock(t),
		PluginDir:    pluginDir,
		LachesisYAML: tiresiasYAML(dir, quotaYAML("own: 2 nodes of 4 GPUs", 4)),
		ExtraConf:    string(fragment),
	})
	t.Cleanup(func() {
		if c != nil {
			c.Down() //nolint:errcheck
		}
	})
	if c == nil {
		t.Fatalf("no cluster to read the log of: %v", err)
	}
	// Up may see slurmctld answer before its first pass stops it.
	want := regexp.MustCompile(`fatal: .*quota\.accounts\.own \(2 nodes of 4 GPUs under one switch\).*the cluster has 4`)
	deadline := time.Now().Add(60 * time.Second)
	for !want.MatchString(c.ControllerLog()) {
		if time.Now().After(deadline) {
			t.Fatalf("slurmctld's log has no fatal error naming quota.accounts.own (Up: %v):\n%s", err, tail(c.ControllerLog(), 15))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Issue 35: a 4-GPU job of an account gets a whole cell although 4 GPUs
// are free in scattered pieces. Two nodes of 4 GPUs, a borrower of 2 GPUs
// on each (2 free on each node); the owner's one-node 4-GPU job reclaims
// one node whole: only the borrower of the node whose eviction loses the
// least work (the younger) is requeued, the owner runs there, and the
// other node's borrower is untouched. Counted in GPUs over the cluster,
// the reclaim took both borrowers (4 GPUs), leaving the 2+2 pieces.
func TestQuotaReclaimGivesAWholeCell(t *testing.T) {
	e := startCluster(t, 2, quotaYAML("own: 1 node of 4 GPUs", 4))
	older := e.submit("-A", "other", "-J", "older", "-w", "lnode1", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	e.waitState(older, "RUNNING", 30*time.Second)
	time.Sleep(8 * time.Second)
	younger := e.submit("-A", "other", "-J", "younger", "-w", "lnode2", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	e.waitState(younger, "RUNNING", 30*time.Second)
	time.Sleep(2 * time.Second)
	owner := e.submit("-A", "own", "-J", "owner", "-N1", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(owner, "RUNNING", 90*time.Second)
	if node := e.show(owner)["NodeList"]; node != "lnode2" {
		t.Fatalf("the owner runs on %q; want lnode2, the node of the cheaper borrower, whole", node)
	}
	if e.restarts(younger) < 1 {
		t.Fatalf("the younger borrower on lnode2 was not requeued: %+v", e.jobs()[younger])
	}
	if e.restarts(older) != 0 || e.jobs()[older].State != "RUNNING" {
		t.Fatalf("the borrower on lnode1 was touched: %+v (restarts %d)", e.jobs()[older], e.restarts(older))
	}
	if !e.logMatches(fmt.Sprintf(`quota reclaim account=own preemptor_job_id=%d job_id=%d .*cell_node=lnode2`, owner, younger)) {
		t.Error("slurmctld's log has no reclaim line naming the owner, the victim and the node freed")
	}
	if n := len(regexp.MustCompile(`quota reclaim account=own `).FindAllString(e.c.ControllerLog(), -1)); n != 1 {
		t.Fatalf("%d reclaims logged, want 1 (one node's borrower)", n)
	}
}

// A reconfigure to a quota the cluster cannot hold names the key and
// leaves slurmctld running: 22.05 keeps the previous config; from 24.05
// the new slurmctld has taken over by its first pass, so it logs the
// misfit and counts the quotas in GPUs (docs/configuration.md).
func TestQuotaUnfitAtReconfigureNamesTheKey(t *testing.T) {
	e := startCluster(t, 1, quotaYAML("own: 4 GPUs", 4))
	if err := e.c.WriteLachesisYAML(tiresiasYAML(e.dir, quotaYAML("own: 2 nodes of 4 GPUs", 4))); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	e.eventually(60*time.Second, "slurmctld's log to name quota.accounts.own's misfit", func() (bool, string) {
		return e.logMatches(`error: .*quota\.accounts\.own \(2 nodes of 4 GPUs under one switch\).*the cluster has 4`), ""
	})
	if e.logMatches(`fatal: `) {
		t.Fatal("a reconfigure stopped slurmctld")
	}
	id := e.submit("-J", "after", "--gpus=1", "--wrap", "sleep 1")
	e.waitState(id, "COMPLETED", 60*time.Second)
}

// Issue 35 item 2: borrowers are kept off owners' idle cells. Two nodes of
// 4 GPUs, account own's quota one of them (bound to lnode1, the first node:
// quota.Bind). A 2-GPU borrower of another account waits a few seconds
// (--begin, so the passes see it waiting; one Slurm starts at submission
// is placed before any pass, docs/configuration.md) and then lands on the
// unbound lnode2, where Slurm's own choice is the first node, lnode1. The
// owner's 4-GPU job then starts at once, with no reclaim. Once it ends, a
// 4-GPU borrower that only own's node can hold is not kept off it: it
// borrows there. AdminComment shows each job's quota state.
func TestQuotaBorrowerKeptOffOwnersCell(t *testing.T) {
	e := startCluster(t, 2, quotaYAML("own: 1 node of 4 GPUs", 4))
	b1 := e.submit("-A", "other", "-J", "b1", "--begin=now+8", "--gpus=2", "--requeue", "--wrap", "sleep 600")
	e.waitState(b1, "RUNNING", 120*time.Second)
	if node := e.show(b1)["NodeList"]; node != "lnode2" {
		t.Fatalf("the borrower runs on %q; want lnode2, the node bound to no quota (lnode1 is own's cell)", node)
	}
	if !e.logMatches(fmt.Sprintf(`job %d kept off node lnode1: .*account own`, b1)) {
		t.Error("slurmctld's log has no steering line naming the borrower, lnode1 and account own")
	}
	e.eventually(30*time.Second, "the borrower's AdminComment to show its quota state", func() (bool, string) {
		ac := e.show(b1)["AdminComment"]
		return strings.Contains(ac, "[quota: other borrowing"), ac
	})
	owner := e.submit("-A", "own", "-J", "owner", "-N1", "--gpus=4", "--wrap", "sleep 15")
	e.waitState(owner, "RUNNING", 30*time.Second)
	if node := e.show(owner)["NodeList"]; node != "lnode1" {
		t.Fatalf("the owner runs on %q; want lnode1, its cell", node)
	}
	if e.logMatches(`quota reclaim `) || e.restarts(b1) != 0 {
		t.Fatalf("a reclaim was needed (restarts of the borrower: %d); the owner's cell should have been free", e.restarts(b1))
	}
	e.eventually(30*time.Second, "the owner's AdminComment to show it within its quota", func() (bool, string) {
		ac := e.show(owner)["AdminComment"]
		return strings.Contains(ac, "[quota: own within 4/4 GPUs]"), ac
	})
	e.waitState(owner, "COMPLETED", 60*time.Second)
	b2 := e.submit("-A", "other", "-J", "b2", "--begin=now+8", "-N1", "--gpus=4", "--requeue", "--wrap", "sleep 600")
	e.waitState(b2, "RUNNING", 120*time.Second)
	if node := e.show(b2)["NodeList"]; node != "lnode1" {
		t.Fatalf("the 4-GPU borrower runs on %q; want lnode1 (own's idle cell, the only node that holds it)", node)
	}
	if ex := e.show(b2)["ExcNodeList"]; ex != "(null)" && ex != "" {
		t.Fatalf("the 4-GPU borrower was kept off %q; it fits nowhere else", ex)
	}
}

// Issue 35: quotas in topology/tree's switches. Four 4-GPU nodes under
// two leaf switches, lnode2 and lnode4 under sw1 (not the nodes' order,
// so the binding is the switches', not the node table's). Account own's
// "2 nodes of 4 GPUs" is bound under one switch (sw1, logged); a borrower
// of two nodes runs there (its nodes known to the core), two younger
// borrowers (less work lost) on sw2's nodes. The owner's job of two
// whole nodes reclaims the borrower of its quota's switch only, and runs
// there.
func TestQuotaOfNodesReclaimsUnderItsSwitch(t *testing.T) {
	topology := "SwitchName=sw1 Nodes=lnode[2,4]\nSwitchName=sw2 Nodes=lnode[1,3]\nSwitchName=root Switches=sw[1-2]\n"
	e := startShapedCluster(t, shape{Nodes: 4, GPUs: 4, TopologyConf: topology}, quotaYAML("own: 2 nodes of 4 GPUs", 4))
	e.eventually(60*time.Second, "slurmctld's log to bind own's nodes under sw1", func() (bool, string) {
		return e.logMatches(`quota cells bound account=own quota="2 nodes of 4 GPUs under one switch" cell_switch=sw1 nodes=lnode2,lnode4 cells=2 source=switches`), ""
	})
	wide := e.submit("-A", "other", "-J", "wide", "-N2", "-w", "lnode[2,4]", "--gpus-per-node=4", "--requeue", "--wrap", "sleep 600")
	e.waitState(wide, "RUNNING", 30*time.Second)
	time.Sleep(8 * time.Second)
	b1 := e.submit("-A", "other", "-J", "b1", "-w", "lnode1", "--gpus=4", "--requeue", "--wrap", "sleep 600")
	b3 := e.submit("-A", "other", "-J", "b3", "-w", "lnode3", "--gpus=4", "--requeue", "--wrap", "sleep 600")
	e.waitState(b1, "RUNNING", 30*time.Second)
	e.waitState(b3, "RUNNING", 30*time.Second)
	time.Sleep(2 * time.Second)
	owner := e.submit("-A", "own", "-J", "owner", "-N2", "--gpus-per-node=4", "--wrap", "sleep 600")
	e.waitState(owner, "RUNNING", 120*time.Second)
	if node := e.show(owner)["NodeList"]; node != "lnode[2,4]" {
		t.Fatalf("the owner runs on %q; want lnode[2,4], its quota's nodes under sw1", node)
	}
	if e.restarts(wide) < 1 {
		t.Fatalf("the borrower of two nodes under sw1 was not requeued: %+v", e.jobs()[wide])
	}
	for _, b := range []uint32{b1, b3} {
		if e.restarts(b) != 0 || e.jobs()[b].State != "RUNNING" {
			t.Fatalf("borrower %d under sw2 was touched: %+v (restarts %d)", b, e.jobs()[b], e.restarts(b))
		}
	}
	if !e.logMatches(fmt.Sprintf(`quota reclaim account=own preemptor_job_id=%d job_id=%d .*cell_node=lnode2,lnode4 cell_switch=sw1`, owner, wide)) {
		t.Error("slurmctld's log has no reclaim line naming the owner, the victim, its nodes and the switch")
	}
	if n := len(regexp.MustCompile(`quota reclaim account=own `).FindAllString(e.c.ControllerLog(), -1)); n != 1 {
		t.Fatalf("%d reclaims logged, want 1 (the borrower under sw1)", n)
	}
}
