package spool_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/spool"
	"github.com/lachesis-sched/lachesis/profile"
)

func open(t *testing.T) (*spool.Spool, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spool", "spool.db")
	s, err := spool.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func rec(id string) profile.Record {
	return profile.Record{ID: id, Model: "bert", Node: "n1", Finished: time.Unix(1700000000, 0).UTC(),
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 2}}}
}

func TestFinishedRunIsPendingUntilDelivered(t *testing.T) {
	s, _ := open(t)
	if err := s.BeginRun(spool.Run{ID: "r1", Model: "bert", UID: 1000, User: "alice", Argv: []string{"python", "t.py"}, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMeasurement("r1", 1, profile.Measurement{CPUs: 4, Throughput: 9}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMeasurement("r1", 2, profile.Measurement{CPUs: 2, Throughput: 8}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ms, err := s.Measurements("r1"); err != nil || len(ms) != 2 || ms[0].CPUs != 4 {
		t.Fatalf("measurements %+v, %v", ms, err)
	}
	if err := s.FinishRun("r1", rec("r1")); err != nil {
		t.Fatal(err)
	}
	p, err := s.Pending(10)
	if err != nil || len(p) != 1 || p[0].Record.ID != "r1" || !p[0].Record.Finished.Equal(rec("r1").Finished) {
		t.Fatalf("pending %+v, %v", p, err)
	}
	if err := s.MarkFailed("r1", errors.New("connection refused")); err != nil {
		t.Fatal(err)
	}
	e, _, _ := s.Get("r1")
	if e.Attempts != 1 || e.LastError != "connection refused" || !e.Delivered.IsZero() {
		t.Fatalf("after a failure: %+v", e)
	}
	if err := s.MarkDelivered("r1", true); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Pending(10); len(p) != 0 {
		t.Fatalf("still pending after delivery: %+v", p)
	}
	e, ok, _ := s.Get("r1")
	if !ok || e.Attempts != 2 || !e.Duplicate || e.Delivered.IsZero() || e.LastError != "" {
		t.Fatalf("after delivery: %+v", e)
	}
	if c, _ := s.Count(); c != (spool.Counts{Pending: 0, Delivered: 1}) {
		t.Fatalf("counts %+v", c)
	}
}

func TestProfilesSurviveReopening(t *testing.T) {
	s, path := open(t)
	s.BeginRun(spool.Run{ID: "r1", Started: time.Now()})
	s.BeginRun(spool.Run{ID: "r2", Started: time.Now()})
	if err := s.FinishRun("r1", rec("r1")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := spool.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if p, _ := s2.Pending(10); len(p) != 1 {
		t.Fatalf("pending after reopen: %+v", p)
	}
	if n, err := s2.InterruptRuns(); n != 1 || err != nil {
		t.Fatalf("interrupted %d runs (%v), want r2 only", n, err)
	}
}

func TestSpoolingARecordTwiceKeepsOne(t *testing.T) {
	s, _ := open(t)
	s.FinishRun("r1", rec("r1"))
	s.FinishRun("r1", rec("r1"))
	if c, _ := s.Count(); c.Pending != 1 {
		t.Fatalf("counts %+v", c)
	}
}

func TestPendingIsOldestFirstAndLimited(t *testing.T) {
	s, _ := open(t)
	for _, id := range []string{"a", "b", "c"} {
		s.FinishRun(id, rec(id))
		time.Sleep(time.Millisecond)
	}
	p, _ := s.Pending(2)
	if len(p) != 2 || p[0].Record.ID != "a" || p[1].Record.ID != "b" {
		t.Fatalf("pending %+v", p)
	}
}

func TestSpoolFilesArePrivate(t *testing.T) {
	s, path := open(t)
	if err := s.BeginRun(spool.Run{ID: "r1", Model: "bert"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, want 0600", p, fi.Mode().Perm())
		}
	}
}
