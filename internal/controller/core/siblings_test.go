package core

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

func owned(s Snapshot, user uint32, account string) Snapshot {
	s.User, s.Account = user, account
	return s
}

// A sweep's member that finished sets its siblings' index, for the same
// user only, until a sibling's service passes it; both moves are logged.
func TestCompletedSiblingRanksTheRestOfItsSweep(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	c, err := New(testConfig(db), store, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	first := owned(running(1, 1, 900, 900), 5, "vision")
	sibling := owned(pending(2, 1, 950), 5, "vision")
	stranger := owned(pending(3, 1, 960), 6, "vision") // another user
	pass(c, 1000, first, sibling, stranger)

	// Job 1 ends after 180 GPU-s; job 2 starts in its place.
	first.State, first.EndTime, first.EndState = StateFinished, 1080, EndCompleted
	sibling.State, sibling.StartTime = StateRunning, 1090
	d := pass(c, 1150, first, sibling, stranger)
	if got := d[1].Factors.SiblingSamples; got != 1 {
		t.Fatalf("job 2 at 60 GPU-s: index from %d siblings, want 1 (job 1's 180 GPU-s)", got)
	}
	if got := d[2].Factors.SiblingSamples; got != 0 {
		t.Fatalf("another user's job took its index from job 1 (%d samples)", got)
	}
	if !strings.Contains(logs.String(), "ranked inside its queue by its sweep") {
		t.Errorf("no log line for the switch to the sweep's index:\n%s", logs.String())
	}

	// Past 180 GPU-s job 2 has outlived its sweep.
	d = pass(c, 1300, first, sibling, stranger)
	if got := d[1].Factors.SiblingSamples; got != 0 {
		t.Fatalf("job 2 at 210 GPU-s still ranked by a 180 GPU-s sibling")
	}
	if !strings.Contains(logs.String(), "outlived its sweep") {
		t.Errorf("no log line for the switch back:\n%s", logs.String())
	}
}

func TestSiblingWindowZeroTurnsSweepsOffOnReload(t *testing.T) {
	dir := t.TempDir()
	c := openCore(t, filepath.Join(dir, "l.db"))
	defer c.Close()
	c.configPath = filepath.Join(dir, "lachesis.yaml")
	a := owned(running(1, 1, 1000, 1000), 5, "")
	b := owned(pending(2, 1, 1010), 5, "")
	pass(c, 1020, a, b)
	a.State, a.EndTime, a.EndState = StateFinished, 1030, EndCompleted
	b.State, b.StartTime = StateRunning, 1035
	if d := pass(c, 1040, a, b); d[1].Factors.SiblingSamples != 1 {
		t.Fatalf("with the default window job 2 has %d completed siblings, want 1", d[1].Factors.SiblingSamples)
	}
	writeFile(t, c.configPath, "tiresias:\n  sibling_window: 0\n")
	if err := c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	if d := pass(c, 1050, a, b); d[1].Factors.SiblingSamples != 0 {
		t.Fatalf("sibling_window 0 left job 2 ranked by its sweep")
	}
	if c.siblings.Len() != 0 {
		t.Fatalf("sweeps tracked with sibling prediction off")
	}
}

// Jobs leave the tracker when they end, purged or not, so it stays the size
// of the active jobs.
func TestSweepsForgetEndedJobs(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 100, owned(pending(1, 1, 0), 5, ""), owned(pending(2, 2, 0), 5, ""))
	if n := c.siblings.Len(); n != 2 {
		t.Fatalf("%d jobs in sweeps, want 2", n)
	}
	pass(c, 200) // both gone from slurmctld
	if n := c.siblings.Len(); n != 0 {
		t.Fatalf("%d jobs still in sweeps after they were purged", n)
	}
}

// A restart replays the ended members kept in the ledger: the sibling
// still waiting is ranked by its sweep on the first pass after it.
func TestSweepsSurviveARestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	a := owned(running(1, 1, 1000, 1000), 5, "vision")
	b := owned(pending(2, 1, 1010), 5, "vision")
	pass(c, 1020, a, b)
	a.State, a.EndTime, a.EndState = StateFinished, 1030, EndCompleted
	pass(c, 1040, a, b)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = openCore(t, db)
	defer c.Close()
	b.State, b.StartTime = StateRunning, 1045
	d := pass(c, 1050, b) // job 1 is gone from slurmctld too
	if got := d[0].Factors.SiblingSamples; got != 1 {
		t.Fatalf("after a restart job 2 is ranked by %d completed siblings, want 1 (job 1's 30 GPU-s)", got)
	}
}

// Issue 26.11: a member that was cancelled (or failed) is no sample for its
// sweep, live or replayed after a restart, and a job of the same user,
// account and width in another partition is not a sibling.
func TestOnlyCompletedMembersOfOnePartitionRankASweep(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	in := func(s Snapshot, part string) Snapshot {
		s = owned(s, 5, "vision")
		s.Partition = part
		return s
	}
	cancelled := in(running(1, 1, 1000, 1000), "gpu")
	failed := in(running(2, 1, 1001, 1000), "gpu")
	other := in(running(3, 1, 1002, 1000), "long")
	waiting := in(pending(4, 1, 1010), "gpu")
	pass(c, 1020, cancelled, failed, other, waiting)
	cancelled.State, cancelled.EndTime, cancelled.EndState = StateFinished, 1030, EndCancelled
	failed.State, failed.EndTime, failed.EndState = StateFinished, 1031, EndFailed
	other.State, other.EndTime, other.EndState = StateFinished, 1032, EndCompleted
	waiting.State, waiting.StartTime = StateRunning, 1033
	d := pass(c, 1040, cancelled, failed, other, waiting)
	if got := d[3].Factors.SiblingSamples; got != 0 {
		t.Fatalf("job 4 ranked by %d siblings: cancelled, failed or other-partition jobs counted", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCore(t, db)
	defer c.Close()
	if d := pass(c, 1050, waiting); d[0].Factors.SiblingSamples != 0 {
		t.Fatalf("after a restart job 4 is ranked by %d replayed siblings", d[0].Factors.SiblingSamples)
	}
	// A completed member of its own partition still counts, after the
	// restart too.
	done := in(running(5, 1, 1015, 1016), "gpu")
	pass(c, 1060, waiting, done)
	done.State, done.EndTime, done.EndState = StateFinished, 1300, EndCompleted
	pass(c, 1310, waiting, done)
	if d := pass(c, 1312, waiting, done); d[0].Factors.SiblingSamples != 1 {
		t.Fatalf("job 4 ranked by %d siblings, want 1 (job 5 completed): %+v", d[0].Factors.SiblingSamples, d[0])
	}
}
