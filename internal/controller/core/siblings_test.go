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
	first.State, first.EndTime = StateFinished, 1080
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
	a.State, a.EndTime = StateFinished, 1030
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
	a.State, a.EndTime = StateFinished, 1030
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
