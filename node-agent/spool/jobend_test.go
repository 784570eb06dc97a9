package spool

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestJobEndIsSpooledOnceUntilDeliveredAndPrunedAfterAWeek(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Unix(1_700_000_000, 0)
	j := JobEnd{JobID: 5, End: 1000, Node: "n1"}
	for range 2 { // the same report twice is one row
		if err := s.AddJobEnd(j, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddJobEnd(JobEnd{JobID: 5, End: 2000, Node: "n1"}, now.Add(time.Second)); err != nil {
		t.Fatal(err) // a later run of a requeued job is its own report
	}
	p, err := s.PendingJobEnds(10)
	if err != nil || len(p) != 2 || p[0].End != 1000 || p[1].End != 2000 {
		t.Fatalf("pending = %+v, %v; want ends 1000 then 2000", p, err)
	}
	if err := s.MarkJobEndFailed(p[0], errors.New("controller down")); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.PendingJobEnds(10); p[0].Attempts != 1 {
		t.Fatalf("attempts = %d, want 1", p[0].Attempts)
	}
	if err := s.MarkJobEndDelivered(p[0], now); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.PendingJobEnds(10); len(p) != 1 || p[0].End != 2000 {
		t.Fatalf("pending after delivery = %+v", p)
	}
	// A week later the delivered row is dropped when a new report comes.
	if err := s.AddJobEnd(JobEnd{JobID: 6, End: 3000, Node: "n1"}, now.Add(8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM job_ends`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows (%v), want 2: the delivered one pruned", n, err)
	}
}
