package core

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// fakeSlurmdbd stands in for sacctmgr's account and association lists.
// Without parents every account it lists is top-level (parent root).
type fakeSlurmdbd struct {
	mu         sync.Mutex
	accts      []slurmcmd.AccountDescription
	err        error
	reads      int
	parents    map[string]string
	parentsErr error
	clusters   []string // the clusters AccountParents was asked about
}

var _ accountLister = (*fakeSlurmdbd)(nil)

func (f *fakeSlurmdbd) AccountDescriptions(context.Context) ([]slurmcmd.AccountDescription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.accts, f.err
}

func (f *fakeSlurmdbd) AccountParents(_ context.Context, cluster string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.clusters = append(f.clusters, cluster)
	if f.parents != nil || f.parentsErr != nil {
		return f.parents, f.parentsErr
	}
	parents := map[string]string{}
	for _, a := range f.accts {
		parents[strings.ToLower(a.Name)] = "root"
	}
	return parents, nil
}

func (f *fakeSlurmdbd) set(err error, accts ...slurmcmd.AccountDescription) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accts, f.err = accts, err
}

func (f *fakeSlurmdbd) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// dbdCore is a core whose quotas come from slurmdbd, with its log.
func dbdCore(t *testing.T, now *int64) (*Core, *bytes.Buffer) {
	t.Helper()
	return ruleCore(t, now, func(cfg *config.Config) {
		cfg.Quota = config.Quota{Accounts: map[string]quota.Spec{}, MaxReclaimPerPass: 4,
			Source: config.QuotaFromSlurmdbd, Refresh: config.DefaultQuotaRefresh}
	})
}

var twoNodes = []ClusterNode{{Name: "n0", GPUs: 4, Index: 0}, {Name: "n1", GPUs: 4, Index: 1}}

// dbdCoreOnTwoNodes is dbdCore at time 1100 that knows the two-node
// table, with the slurmdbd it reads from holding accts.
func dbdCoreOnTwoNodes(t *testing.T, accts ...slurmcmd.AccountDescription) (*Core, *bytes.Buffer, *fakeSlurmdbd) {
	t.Helper()
	now := int64(1100)
	c, logged := dbdCore(t, &now)
	if err := c.SetCluster(twoNodes); err != nil {
		t.Fatal(err)
	}
	dbd := &fakeSlurmdbd{}
	dbd.set(nil, accts...)
	return c, logged, dbd
}

// An admin's quota in an account's description: read before the node
// table it waits, then binds and ranks the owner's job above a borrower
// that waited longer, as lachesis.yaml's quota does.
func TestSlurmdbdQuotaRanksOwnersFirst(t *testing.T) {
	now := int64(1100)
	c, logged := dbdCore(t, &now)
	dbd := &fakeSlurmdbd{}
	dbd.set(nil, slurmcmd.AccountDescription{Name: "root", Description: "default root account"},
		slurmcmd.AccountDescription{Name: "own", Description: "own lab; lachesis-quota=2 gpus"},
		slurmcmd.AccountDescription{Name: "other", Description: "other lab"})
	if next := c.refreshQuotas(t.Context(), dbd, true); next != quotaNodesWait || len(c.Config().Quota.Accounts) != 0 {
		t.Fatalf("read before the node table: next in %v, quotas %v; want them waiting", next, c.Config().Quota.Accounts)
	}
	if err := c.SetCluster(twoNodes); err != nil {
		t.Fatal(err)
	}
	if next := c.refreshQuotas(t.Context(), dbd, false); next != config.DefaultQuotaRefresh || dbd.count() != 1 {
		t.Fatalf("next in %v after %d reads; want the waiting quotas bound without a new read", next, dbd.count())
	}
	if got := c.Config().Quota.Accounts; len(got) != 1 || got["own"] != (quota.Spec{Cells: 2, CellGPUs: 1}) || c.cluster.binding.GPUs("own") != 2 {
		t.Fatalf("quotas in force %v, bound %+v", got, c.cluster.binding)
	}
	if !strings.Contains(logged.String(), `msg="quotas read from slurmdbd" source=slurmdbd accounts=1 changed=true quotas="[own=2 GPUs in cells of 1]"`) {
		t.Fatalf("no log line of the read:\n%s", logged)
	}
	d := pass(c, now,
		requeueable(inAccount(running(1, 4, 900, 1000), "fill")),
		requeueable(inAccount(pending(3, 2, 100), "other")),
		requeueable(inAccount(pending(4, 2, 1090), "own")),
	)
	if d[2].Priority <= d[1].Priority {
		t.Fatalf("the owner's job has priority %d, the older borrower %d", d[2].Priority, d[1].Priority)
	}
	within := false
	for _, j := range c.jobs {
		within = within || (j.ID == 4 && j.Quota == priority.QuotaWithin)
	}
	if !within {
		t.Fatal("the owner's job is not within its quota")
	}
}

// Whatever goes wrong with a read is logged naming the account and the
// field, and changes nothing: sacctmgr failing or quotas the cluster
// cannot hold keep the quotas in force; a refused description (a bad
// text, the marker twice, a control character, a name Slurm would not
// give) keeps that account's quota in force, or none.
func TestSlurmdbdReadThatFailsChangesNothing(t *testing.T) {
	good := slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=1 node of 4 gpus"}
	c, logged, dbd := dbdCoreOnTwoNodes(t, good)
	c.refreshQuotas(t.Context(), dbd, true)
	bound := c.cluster.binding
	if bound.GPUs("own") != 4 {
		t.Fatalf("own's quota not bound: %+v", bound)
	}
	for _, tc := range []struct {
		name  string
		err   error
		accts []slurmcmd.AccountDescription
		log   string
	}{
		{"sacctmgr fails", errors.New("sacctmgr: error: Problem talking to the database"), nil,
			`quotas not read from slurmdbd, keeping the quotas in force" source=slurmdbd err="sacctmgr: error: Problem talking to the database"`},
		{"a bad text", nil, []slurmcmd.AccountDescription{good, {Name: "vision", Description: "lab; lachesis-quota=lots"}},
			`msg="slurmdbd quota refused, the account keeps the quota in force" source=slurmdbd err="slurmdbd account vision Description lachesis-quota: bad quota: \"lots\"`},
		{"the marker twice", nil, []slurmcmd.AccountDescription{{Name: "own", Description: "lachesis-quota=1 gpu; lachesis-quota=8 gpus"}},
			`slurmdbd account own Description lachesis-quota: bad quota: lachesis-quota is written 2 times`},
		{"a control character", nil, []slurmcmd.AccountDescription{{Name: "own", Description: "lachesis-quota=1 gpu\x1b[2J"}},
			`slurmdbd account own Description lachesis-quota: bad quota: the quota text \"1 gpu\\x1b[2J\" holds a control character`},
		{"a newline", nil, []slurmcmd.AccountDescription{{Name: "own", Description: "lachesis-quota=1\nnode of 4 gpus"}},
			`slurmdbd account own Description lachesis-quota: bad quota: the quota text \"1\\nnode of 4 gpus\" holds a control character`},
		{"an account name over the bound", nil, []slurmcmd.AccountDescription{good, {Name: strings.Repeat("a", 65), Description: "lachesis-quota=1 gpu"}},
			`Description lachesis-quota: bad quota: \"aaaa`},
		{"quotas over the cluster", nil, []slurmcmd.AccountDescription{good, {Name: "vision", Description: "lachesis-quota=2 nodes of 4 gpus"}},
			`slurmdbd quotas do not fit the cluster, keeping the quotas in force" source=slurmdbd err="slurmdbd account vision Description lachesis-quota: 2 nodes of 4 GPUs under one switch does not fit the cluster: the quotas add up to 12 GPUs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logged.Reset()
			dbd.set(tc.err, tc.accts...)
			if next := c.refreshQuotas(t.Context(), dbd, true); next != config.DefaultQuotaRefresh {
				t.Fatalf("next read in %v", next)
			}
			if !strings.Contains(logged.String(), tc.log) {
				t.Fatalf("log:\n%s\nwant %s", logged, tc.log)
			}
			if got := c.Config().Quota.Accounts; len(got) != 1 || got["own"].GPUs() != 4 || c.cluster.binding.GPUs("own") != 4 {
				t.Fatalf("the quotas in force changed: %v, %+v", got, c.cluster.binding)
			}
		})
	}
	// One account's typo holds back no other's edit.
	dbd.set(nil, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=oops"},
		slurmcmd.AccountDescription{Name: "nlp", Description: "lachesis-quota=2 gpus"})
	c.refreshQuotas(t.Context(), dbd, true)
	if got := c.Config().Quota.Accounts; len(got) != 2 || got["own"].GPUs() != 4 || got["nlp"].GPUs() != 2 {
		t.Fatalf("own's typo and nlp's new quota: %v", got)
	}
	// Many bad descriptions: a bounded number of lines.
	logged.Reset()
	var many []slurmcmd.AccountDescription
	for i := range 100 {
		many = append(many, slurmcmd.AccountDescription{Name: "a" + strings.Repeat("x", i%50) + string(rune('a'+i%26)), Description: "lachesis-quota=?"})
	}
	dbd.set(nil, many...)
	c.refreshQuotas(t.Context(), dbd, true)
	if n := strings.Count(logged.String(), "level=ERROR"); n != maxQuotaErrorsLogged+1 {
		t.Fatalf("%d error lines for one read, want %d", n, maxQuotaErrorsLogged+1)
	}
	if !strings.Contains(logged.String(), `msg="more slurmdbd quotas refused"`) {
		t.Fatalf("the rest not counted:\n%s", logged)
	}
}

// A description an admin emptied takes the quota away at the next read;
// quotas off, the ranker has no quota bands.
func TestSlurmdbdQuotaRemoved(t *testing.T) {
	c, _, dbd := dbdCoreOnTwoNodes(t, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=2 gpus"})
	c.refreshQuotas(t.Context(), dbd, true)
	if !c.ranker.Config().Quotas {
		t.Fatal("quotas on, yet the ranker has no quota bands")
	}
	dbd.set(nil, slurmcmd.AccountDescription{Name: "own", Description: "own lab"})
	c.refreshQuotas(t.Context(), dbd, true)
	if len(c.Config().Quota.Accounts) != 0 || c.cluster.binding != nil || c.ranker.Config().Quotas {
		t.Fatalf("the quota stayed: %v, %+v, ranker quotas %v", c.Config().Quota.Accounts, c.cluster.binding, c.ranker.Config().Quotas)
	}
}

// A reconfigure keeps the quotas read from slurmdbd until the read it
// asks for (its file has none); with quota.source yaml, slurmdbd is never
// asked.
func TestSlurmdbdQuotasAcrossReconfigure(t *testing.T) {
	c, _, dbd := dbdCoreOnTwoNodes(t, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=1 node of 4 gpus"})
	c.configPath = filepath.Join(t.TempDir(), "lachesis.yaml")
	c.refreshQuotas(t.Context(), dbd, true)
	c.quotaSource.kick = make(chan struct{}, 1)
	writeFile(t, c.configPath, "quota:\n  source: slurmdbd\n  refresh: 60\n")
	if err := c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	if got := c.Config().Quota; got.Accounts["own"].GPUs() != 4 || c.cluster.binding.GPUs("own") != 4 || got.Refresh != time.Minute {
		t.Fatalf("after reconfigure: %+v, bound %+v", got, c.cluster.binding)
	}
	select {
	case <-c.quotaSource.kick:
	default:
		t.Fatal("the reconfigure asked for no read")
	}
	writeFile(t, c.configPath, "quota:\n  accounts: {other: 2 GPUs}\n")
	if err := c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	reads := dbd.count()
	if next := c.refreshQuotas(t.Context(), dbd, true); next != config.DefaultQuotaRefresh || dbd.count() != reads {
		t.Fatalf("quota.source yaml: slurmdbd read (%d reads), next in %v", dbd.count()-reads, next)
	}
	if got := c.Config().Quota.Accounts; len(got) != 1 || got["other"].GPUs() != 2 {
		t.Fatalf("lachesis.yaml's quotas not in force: %v", got)
	}
}

// The goroutine reads at once, again when kicked, and stops with stop.
func TestQuotaSourceGoroutineReadsAtStartAndWhenKicked(t *testing.T) {
	c, _, dbd := dbdCoreOnTwoNodes(t, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=2 gpus"})
	c.quotaSource.kick = make(chan struct{}, 1)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { c.runQuotaSource(stop, dbd); close(done) }()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("the read at start", func() bool { return c.Config().Quota.Accounts["own"].GPUs() == 2 })
	dbd.set(nil, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=3 gpus"})
	c.kickQuotaSource()
	waitFor("the read a kick asks for", func() bool { return c.Config().Quota.Accounts["own"].GPUs() == 3 })
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the goroutine did not stop")
	}
}

// A node table the quotas read from slurmdbd no longer fit is refused
// naming the account's Description, not lachesis.yaml's key; the binding
// stays.
func TestSlurmdbdQuotaMisfitAfterReshapeNamesTheDescription(t *testing.T) {
	c, _, dbd := dbdCoreOnTwoNodes(t, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=1 node of 4 gpus"})
	c.refreshQuotas(t.Context(), dbd, true)
	err := c.SetCluster([]ClusterNode{{Name: "n0", GPUs: 2}})
	if !errors.Is(err, ErrQuotaUnfit) || !strings.Contains(err.Error(), "slurmdbd account own Description lachesis-quota: 1 node of 4 GPUs does not fit") {
		t.Fatalf("SetCluster = %v", err)
	}
	if c.cluster.binding.GPUs("own") != 4 {
		t.Fatalf("the binding changed: %+v", c.cluster.binding)
	}
}

// Issue 35: only a top-level account's description counts. A coordinator
// may add an account, description included, under an account they
// coordinate, so a marker on a sub-account (or on an account with no
// association in this cluster) is refused naming it and why, and changes
// nothing; a top-level account's quota is kept. The parents are read for
// slurmctld's cluster, and only when some description holds the marker.
func TestSlurmdbdQuotaOnlyForTopLevelAccounts(t *testing.T) {
	c, logged, dbd := dbdCoreOnTwoNodes(t, slurmcmd.AccountDescription{Name: "own", Description: "own lab; lachesis-quota=2 gpus"},
		slurmcmd.AccountDescription{Name: "sub", Description: "lachesis-quota=2 gpus"},
		slurmcmd.AccountDescription{Name: "Deep", Description: "lachesis-quota=1 gpu"},
		slurmcmd.AccountDescription{Name: "elsewhere", Description: "lachesis-quota=1 gpu"},
		slurmcmd.AccountDescription{Name: "root", Description: "lachesis-quota=1 gpu"})
	c.env.ClusterName = "gpu"
	dbd.parents = map[string]string{"root": "", "own": "root", "sub": "own", "deep": "sub"}
	c.refreshQuotas(t.Context(), dbd, true)
	if got := c.Config().Quota.Accounts; len(got) != 1 || got["own"].GPUs() != 2 || c.cluster.binding.GPUs("sub") != 0 {
		t.Fatalf("quotas in force %v, bound %+v; want own's alone", got, c.cluster.binding)
	}
	for _, want := range []string{
		`err="slurmdbd account sub Description lachesis-quota: parent own in cluster gpu: not a top-level account: a coordinator of its parent could have created it"`,
		`err="slurmdbd account Deep Description lachesis-quota: parent sub in cluster gpu: not a top-level account`,
		`err="slurmdbd account elsewhere Description lachesis-quota: no association in cluster gpu: not a top-level account`,
		`err="slurmdbd account root Description lachesis-quota: the root of cluster gpu: not a top-level account`,
	} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log:\n%s\nwant %s", logged, want)
		}
	}
	if len(dbd.clusters) != 1 || dbd.clusters[0] != "gpu" {
		t.Fatalf("parents asked for clusters %q, want [gpu]", dbd.clusters)
	}
	// A top-level account an admin moves under another keeps the quota in
	// force, as any refused description does, until an admin removes it.
	dbd.parents["own"] = "sub"
	c.refreshQuotas(t.Context(), dbd, true)
	if got := c.Config().Quota.Accounts; len(got) != 1 || got["own"].GPUs() != 2 {
		t.Fatalf("quotas in force %v, want own's kept", got)
	}
	// The parents unread: nothing changes.
	logged.Reset()
	dbd.parentsErr = errors.New("sacctmgr: error: Problem talking to the database")
	dbd.set(nil, slurmcmd.AccountDescription{Name: "own", Description: "lachesis-quota=4 gpus"})
	c.refreshQuotas(t.Context(), dbd, true)
	if got := c.Config().Quota.Accounts; got["own"].GPUs() != 2 || !strings.Contains(logged.String(), `quotas not read from slurmdbd (the accounts' parents), keeping the quotas in force" source=slurmdbd err="sacctmgr: error: Problem talking to the database"`) {
		t.Fatalf("quotas in force %v; log:\n%s", got, logged)
	}
	// No marker anywhere: the parents are not asked for.
	asked := len(dbd.clusters)
	dbd.set(nil, slurmcmd.AccountDescription{Name: "own", Description: "own lab"})
	c.refreshQuotas(t.Context(), dbd, true)
	if len(dbd.clusters) != asked || len(c.Config().Quota.Accounts) != 0 {
		t.Fatalf("without a marker: parents asked %d times more, quotas %v", len(dbd.clusters)-asked, c.Config().Quota.Accounts)
	}
}
