package gpushare

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// restartCore closes c (its writer saves what is queued) and opens a new
// core on the same ledger file, as slurmctld's restart does.
func restartCore(t *testing.T, c *testCore, buf *bytes.Buffer) *testCore {
	t.Helper()
	cfg := c.cfg
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	return openCoreLog(t, cfg, slog.New(slog.NewTextHandler(buf, nil)))
}

// savedExclusions is the jobs whose exclusion c's ledger keeps once the
// core's writer has flushed what changed.
func savedExclusions(t *testing.T, c *testCore) string {
	t.Helper()
	c.Flush(c.store)
	rows, err := c.store.Exclusions()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(jobIDs(rows))
}

func jobIDs(rows []ledger.Exclusion) []uint32 {
	var ids []uint32
	for _, r := range rows {
		ids = append(ids, r.JobID)
	}
	slices.Sort(ids)
	return ids
}

// A guest kept off a node beside a host it would slow, with the user's
// own list, then slurmctld restarts. While the host runs (the agents'
// reports not in yet), the new core keeps the node without an update;
// once the host has ended it lifts exactly Lachesis's node and writes
// back the user's list verbatim, and forgets the job. Before the ledger
// kept exclusions, n1 stayed in the list for good.
func TestAJudgedExclusionSurvivesARestartAndIsLiftedWhenTheHostEnds(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	bad := waitingGuestJob(2, mallory, "ResNet-50/bs64")
	sj.lists[2] = "u[1-2]"
	judgeBesideHost(c, host, bad)
	drain(t, c, sj)
	if got := sj.list(2); got != "u[1-2],n1" {
		t.Fatalf("ExcNodeList %q, want the user's u[1-2] and n1", got)
	}
	c = restartCore(t, c, &buf)
	defer c.Close()
	sets := len(sj.sets)
	for now := int64(2000); now < 2050; now += 10 {
		pass(c, now, host, bad)
		drain(t, c, sj)
	}
	if got := sj.list(2); got != "u[1-2],n1" || len(sj.sets) != sets {
		t.Fatalf("while the host runs ExcNodeList %q after updates %v, want u[1-2],n1 kept without one", got, sj.sets[sets:])
	}
	pass(c, 2100, bad) // the host has ended
	drain(t, c, sj)
	if got := sj.list(2); got != "u[1-2]" {
		t.Fatalf("after the host ended ExcNodeList %q, want the user's own u[1-2] exactly", got)
	}
	if !strings.Contains(buf.String(), "job 2 may run on node n1 again") {
		t.Fatalf("log lacks the lift:\n%s", buf.String())
	}
	pass(c, 2110, bad)
	if got := savedExclusions(t, c); got != "[]" {
		t.Fatalf("ledger keeps jobs %s after nothing is left of Lachesis's", got)
	}
}

// A revert's pin survives a restart while its host runs, and its node is
// lifted once the host ends. A pinned job that finished while slurmctld
// was down is forgotten, its row dropped.
func TestAPinSurvivesARestartAndAFinishedJobsIsForgotten(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	sj := newFakeSlurm()
	sj.lists[2] = "u9"
	revertOnce(t, c, sj)
	if l := sj.list(2); l != "u9,n1" {
		t.Fatalf("ExcNodeList %q, want the user's u9 and n1", l)
	}
	// Job 3, pinned too, finishes while slurmctld is down.
	c.mu.Lock()
	c.pinOff(3, 1, "n1", "introspection requeued it from there", 1100)
	c.mu.Unlock()
	c = restartCore(t, c, &buf)
	defer c.Close()
	host := shardJob(1, owner, "gpu", "resnet")
	guest := waitingGuestJob(2, mallory, "lstm")
	pass(c, 1200, host, guest)
	if got := drain(t, c, sj); len(got) != 0 || sj.list(2) != "u9,n1" {
		t.Fatalf("while the host runs sent %+v, ExcNodeList %q; want u9,n1 kept", got, sj.list(2))
	}
	if got := savedExclusions(t, c); got != "[2]" {
		t.Fatalf("ledger keeps jobs %s, want job 2's alone (job 3 finished)", got)
	}
	pass(c, 1210, guest) // the host has ended
	drain(t, c, sj)
	if l := sj.list(2); l != "u9" {
		t.Fatalf("after the host ended ExcNodeList %q, want the user's u9", l)
	}
}

// The ledger is a file: a row that is not what Lachesis writes is logged,
// skipped and dropped; the others are restored.
func TestAHostileExclusionRowIsSkippedAndDropped(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	store := c.store
	good := ledger.Exclusion{JobID: 2, Ours: []string{"n1"}, Applied: true, Holds: []ledger.ExclusionHold{{Node: "n1", Host: 1, Until: 5000, Why: "pinned"}}}
	if err := store.SaveExclusions([]ledger.Exclusion{
		good,
		{JobID: 3, UserRaw: "u1 JobId=9", UserSet: []string{"u1"}, Applied: true},
		{JobID: 4, Ours: []string{"../n1"}, Applied: true},
		{JobID: 5, Ours: []string{"n1"}, Holds: []ledger.ExclusionHold{{Node: "n1", Host: 1, Why: strings.Repeat("x", maxHoldWhy+1)}}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	c = restartCore(t, c, &buf)
	defer c.Close()
	c.mu.Lock()
	n, ok := len(c.intro.excl), c.intro.excl[2] != nil
	c.mu.Unlock()
	if n != 1 || !ok || strings.Count(buf.String(), "exclusion in the ledger refused") != 3 {
		t.Fatalf("%d restored (job 2: %v), want job 2's alone and three refusals logged:\n%s", n, ok, buf.String())
	}
	if got := savedExclusions(t, c); got != "[2]" {
		t.Fatalf("ledger keeps jobs %s, want job 2's alone", got)
	}
}
