package cluster_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// Issue 35 item 1: quotas read from slurmdbd (quota.source: slurmdbd), on
// a cluster with a real slurmdbd and MariaDB. One 4-GPU node, one
// Tiresias queue, as TestQuotaOwnerFirst, but lachesis.yaml names no
// quota: an admin sets account own's quota in its Description.
//
//   - the core reads it (at the reconfigure the admin asks for) and logs
//     it; own's job within its quota starts ahead of a borrower that
//     waited longer;
//   - the attack: the ordinary test user tries to give account other a
//     quota, and to add an account with one, through sacctmgr; slurmdbd
//     refuses both, and the quotas read stay own's alone;
//   - the coordinator's attack (issue 35): an admin makes the test user a
//     coordinator of own; the test user, with sacctmgr as themself, adds a
//     sub-account of own with a quota in its description and an
//     association for themself in it, as slurmdbd lets a coordinator. The
//     core refuses the quota (not a top-level account) and logs it naming
//     the account; the test user's job in it does not rank as within a
//     quota: it waits behind the older borrower;
//   - an admin's bad description (other: "lachesis-quota=lots") is logged
//     naming the account and the field, and changes nothing: own's job
//     still starts first.
func TestQuotaFromSlurmdbd(t *testing.T) {
	e := startSlurmdbdCluster(t, 4,
		"tiresias:\n  mode: las\n  thresholds: [1000000]\n  promote_knob: 0\n"+
			"quota:\n  source: slurmdbd\n  refresh: 30\n  max_reclaim_per_pass: 4\n",
		"own", "other", "fill")

	e.sacctmgr("modify", "account", "own", "set", "Description=own lab; lachesis-quota=2 GPUs")
	own := regexp.QuoteMeta(`quotas="[own=2 GPUs in cells of 1]"`)
	e.reconfigureUntilRead(`quotas read from slurmdbd source=slurmdbd accounts=1 changed=true ` + own)

	// The attack: an ordinary user edits a description, and adds an
	// account with one. slurmdbd refuses both (as_mysql_modify_accts and
	// as_mysql_add_accts: admins and operators only, coordinators may add).
	testenv.EnsureUser(t, testUser)
	for _, args := range [][]string{
		{"-i", "modify", "account", "other", "set", "Description=lachesis-quota=4 GPUs"},
		{"-i", "modify", "account", "own", "set", "Description=lachesis-quota=4 GPUs"},
		{"-i", "add", "account", "evil", "Description=lachesis-quota=4 GPUs"},
	} {
		out, err := e.c.RunAs(testUser, "sacctmgr", args...)
		// 22.05 and 24.11 word the refusal differently.
		if err == nil || !regexp.MustCompile(`privilege|denied|Only admins`).MatchString(out) {
			t.Fatalf("the test user's sacctmgr %s was not refused: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	descs, err := e.c.Run("sacctmgr", "-nP", "show", "account", "format=Account,Description")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(descs, "own|own lab; lachesis-quota=2 gpus\n") || strings.Contains(descs, "lachesis-quota=4") || strings.Contains(descs, "evil") {
		t.Fatalf("an ordinary user changed slurmdbd's accounts:\n%s", descs)
	}
	// The coordinator's attack. slurmdbd lets a coordinator of own add an
	// account under own, description included (as_mysql_add_accts,
	// as_mysql_add_assocs), and a user association in it.
	e.sacctmgr("add", "user", testUser, "Account=own")
	e.sacctmgr("add", "coordinator", "Account=own", "Names="+testUser)
	for _, args := range [][]string{
		{"-i", "add", "account", "sub", "Parent=own", "Description=lachesis-quota=2 GPUs"},
		{"-i", "add", "user", testUser, "Account=sub"},
	} {
		if out, err := e.c.RunAs(testUser, "sacctmgr", args...); err != nil {
			t.Fatalf("the coordinator's sacctmgr %s failed, so the attack was not made: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if assocs, err := e.c.Run("sacctmgr", "-nP", "show", "assoc", "where", "account=sub", "format=Account,User,ParentName"); err != nil || !strings.Contains(assocs, "sub||own\n") || !strings.Contains(assocs, "sub|"+testUser+"|\n") {
		t.Fatalf("the coordinator's sub-account and association are not in slurmdbd: %v\n%s", err, assocs)
	}
	// A read after the attack, whatever it made of sub's description.
	e.reconfigureUntilRead(`slurmdbd account sub Description|quotas="\[[^"]*sub=`)

	// An admin's typo on another account: logged naming it, nothing changes.
	e.sacctmgr("modify", "account", "other", "set", "Description=lachesis-quota=lots")
	e.reconfigureUntilRead(`slurmdbd quota refused, the account keeps the quota in force source=slurmdbd err=.*slurmdbd account other Description lachesis-quota: bad quota: .{0,2}lots`)
	if e.logMatches(`quotas="\[[^"]*other=`) || e.logMatches(`quotas="\[[^"]*4 GPUs`) {
		t.Fatalf("a quota other than own's 2 GPUs was read:\n%s", tail(e.c.ControllerLog(), 30))
	}

	// Mirrors TestQuotaOwnerFirst: the node is held by a job that cannot
	// be requeued, so no reclaim is involved.
	fill := e.submit("-A", "fill", "-J", "fill", "--gpus=4", "--no-requeue", "--wrap", "sleep 12")
	e.waitState(fill, "RUNNING", 30*time.Second)
	borrower := e.submit("-A", "other", "-J", "borrower", "--gpus=4", "--wrap", "sleep 5")
	time.Sleep(2 * time.Second) // the borrower waits longer
	attacker := e.submitAs("-A", "sub", "-J", "attacker", "--gpus=2", "--wrap", "sleep 5")
	owner := e.submit("-A", "own", "-J", "owner", "--gpus=2", "--wrap", "sleep 20")
	e.eventually(20*time.Second, "sprio to rank the owner above the borrower, and the borrower above the coordinator's job in sub", func() (bool, string) {
		p := e.prio()
		return p[owner].Priority > p[borrower].Priority && p[borrower].Priority > p[attacker].Priority,
			fmt.Sprintf("owner %+v borrower %+v attacker %+v", p[owner], p[borrower], p[attacker])
	})
	if !e.logMatches(`slurmdbd quota refused, the account keeps the quota in force source=slurmdbd err=.*slurmdbd account sub Description lachesis-quota: parent own in cluster \S+: not a top-level account: a coordinator of its parent could have created it`) ||
		e.logMatches(`quotas="\[[^"]*sub=`) {
		t.Fatalf("the sub-account's quota was not refused naming it:\n%s", tail(e.c.ControllerLog(), 30))
	}
	e.waitState(owner, "RUNNING", 60*time.Second)
	if st := e.jobs()[borrower].State; st != "PENDING" {
		t.Fatalf("the borrower is %s while the owner runs; want it waiting behind the owner", st)
	}
	// Moving sub under root: 24.11's slurmdbd asks the coordinator to
	// coordinate the new parent (as_mysql_modify_assocs), 22.05's only the
	// old one (_process_modify_assoc_results), so there a coordinator of
	// own lifts sub to the top and its quota counts: a gap this rule does
	// not close (docs/security.md), logged here, not passed over.
	out, err := e.c.RunAs(testUser, "sacctmgr", "-i", "modify", "account", "sub", "set", "Parent=root")
	assocs, _ := e.c.Run("sacctmgr", "-nP", "show", "assoc", "where", "account=sub", "format=Account,User,ParentName")
	moved := strings.Contains(assocs, "sub||root\n")
	switch {
	case moved && releaseBefore(slurmRelease, "24.11"):
		t.Logf("KNOWN GAP on Slurm %s: the coordinator moved sub under root (docs/security.md): %v %s", slurmRelease, err, out)
	case moved:
		t.Fatalf("Slurm %s let the coordinator move sub under root (sacctmgr: %v %s):\n%s", slurmRelease, err, out, assocs)
	}
}

// reconfigureUntilRead asks slurmctld to reconfigure, which makes the
// core read slurmdbd's quotas again, until its log matches pattern (a
// read after the reconfigure).
func (e *env) reconfigureUntilRead(pattern string) {
	e.t.Helper()
	before := len(e.c.ControllerLog())
	if err := e.c.Reconfigure(); err != nil {
		e.t.Fatal(err)
	}
	re := regexp.MustCompile(pattern)
	e.eventually(45*time.Second, "a read of slurmdbd's quotas matching "+pattern, func() (bool, string) {
		log := e.c.ControllerLog()
		if len(log) < before {
			before = 0 // a new slurmctld's log (24.11 reconfigures so)
		}
		return re.MatchString(log[before:]), tail(log, 8)
	})
}
