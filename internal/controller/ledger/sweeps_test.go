package ledger

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

func finishedIn(id uint32, submit, finished int64, key priority.SiblingKey, inSweep bool, gpuSeconds float64) Record {
	r := Record{JobID: id, FirstSubmit: submit, Account: priority.NewAccount(submit), Finished: finished,
		Sweep: key, InSweep: inSweep}
	r.ServiceClosed = gpuSeconds
	return r
}

// A completion keeps its sweep key; SweepEnds lists the most recent ones
// oldest submission first, and none of the jobs placed in no sweep.
func TestSweepEndsReplayInSubmitOrder(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k := priority.SiblingKey{User: 1000, Account: "vision", GPUs: 4, Partition: "gpu"}
	cancelled := finishedIn(1, 300, 900, k, true, 40)
	cancelled.SweepSample = false
	completed := finishedIn(2, 100, 800, k, true, 30)
	completed.SweepSample = true
	err = s.Save([]Record{
		cancelled,                            // finished last, submitted last
		completed,                            // finished second
		finishedIn(3, 200, 700, k, true, 20), // finished first: beyond a limit of 2
		finishedIn(4, 50, 950, k, false, 10), // never placed in a sweep
		{JobID: 5, FirstSubmit: 60, Account: priority.NewAccount(60), Sweep: k, InSweep: true}, // active
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.SweepEnds(2)
	if err != nil {
		t.Fatal(err)
	}
	want := []SweepEnd{
		{JobID: 2, Key: k, FirstSubmit: 100, GPUSeconds: 30, Sample: true},
		{JobID: 1, Key: k, FirstSubmit: 300, GPUSeconds: 40, Sample: false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SweepEnds(2) = %+v, want %+v", got, want)
	}
}

// A ledger made before sweeps has none of their columns: opening it adds
// them, its old completions are not replayed, and new ones are.
func TestLedgerWithoutSweepsIsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, `
CREATE TABLE completed (job_id INTEGER NOT NULL, finished INTEGER NOT NULL, gpu_seconds REAL NOT NULL,
	PRIMARY KEY (job_id, finished));
INSERT INTO completed VALUES (7, 100, 55);`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("opening a ledger without sweep columns: %v", err)
	}
	defer s.Close()
	if ends, err := s.SweepEnds(10); err != nil || len(ends) != 0 {
		t.Fatalf("old completions replayed as sweep members: %+v, %v", ends, err)
	}
	k := priority.SiblingKey{User: 1, GPUs: 1}
	if err := s.Save([]Record{finishedIn(8, 10, 200, k, true, 5)}); err != nil {
		t.Fatal(err)
	}
	if ends, err := s.SweepEnds(10); err != nil || len(ends) != 1 || ends[0].JobID != 8 {
		t.Fatalf("new completion not replayed: %+v, %v", ends, err)
	}
	samples, total, err := s.CompletedGPUTimes(10)
	if err != nil || total != 2 || len(samples) != 2 {
		t.Fatalf("history after migration: %v of %d, %v; want both completions", samples, total, err)
	}
}
