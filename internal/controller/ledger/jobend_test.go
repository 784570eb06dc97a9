package ledger

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

func TestCorrectedRunOnlyEverLowersTheCharge(t *testing.T) {
	run := LastRun{Start: 100, GPUs: 2, Seconds: 35} // charged to Slurm's end, 135
	tests := []struct {
		name     string
		run      LastRun
		end      int64
		wantSecs float64
		wantLess float64
		wantOK   bool
	}{
		{"earlier end lowers by GPUs times the difference", run, 115, 15, 40, true},
		{"end equal to the charged end changes nothing", run, 135, 35, 0, false},
		{"later end is refused, never raising the charge", run, 500, 35, 0, false},
		{"end before the run's start is refused", run, 99, 35, 0, false},
		{"end at the start charges nothing for the run", run, 100, 0, 70, true},
		{"run of unknown GPUs (old ledger row) is never corrected", LastRun{Start: 100, Seconds: 35}, 115, 35, 0, false},
		{"run with no start is never corrected", LastRun{GPUs: 2, Seconds: 35}, 10, 35, 0, false},
		{"run on a type of speed 2.5 is lowered at its charged rate", LastRun{Start: 100, GPUs: 2, Seconds: 35, Speed: 2.5}, 115, 15, 100, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secs, less, ok := CorrectedRun(tc.run, tc.end)
			if secs != tc.wantSecs || less != tc.wantLess || ok != tc.wantOK {
				t.Fatalf("CorrectedRun(%+v, %d) = %v, %v, %v; want %v, %v, %v",
					tc.run, tc.end, secs, less, ok, tc.wantSecs, tc.wantLess, tc.wantOK)
			}
		})
	}
}

func TestCorrectEndLowersHistoryOnceAndIsIdempotent(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 10 GPU-s from an earlier run, then 2 GPUs from 100 to Slurm's 135.
	done := Record{JobID: 7, Account: priority.Account{ServiceClosed: 80, LastRun: 35}, Finished: 135,
		LastRunStart: 100, LastRunGPUs: 2}
	if err := s.Save([]Record{done}); err != nil {
		t.Fatal(err)
	}
	c, did, err := s.CorrectEnd(7, 115)
	if err != nil || !did || c.Before != 80 || c.After != 40 {
		t.Fatalf("first correction: %+v, %v, %v; want 80 -> 40", c, did, err)
	}
	for _, end := range []int64{115, 120, 135, 1000} {
		if c, did, err := s.CorrectEnd(7, end); err != nil || did || c.After != 40 {
			t.Fatalf("report of end %d after the correction: %+v, %v, %v; want unchanged 40", end, c, did, err)
		}
	}
	samples, _, err := s.CompletedGPUTimes(10)
	if err != nil || len(samples) != 1 || samples[0] != 40 {
		t.Fatalf("history = %v, %v; want [40]", samples, err)
	}
	r, _, err := s.Get(7)
	if err != nil || r.ServiceClosed != 40 || r.LastRun != 15 {
		t.Fatalf("jobs row = %+v, %v; want service 40, last run 15", r, err)
	}
	if _, _, err := s.CorrectEnd(8, 115); !errors.Is(err, ErrNoCompletion) {
		t.Fatalf("unknown job: %v; want ErrNoCompletion", err)
	}
}

// A run charged at an effective rate (effective service) is corrected at
// that rate, so the history keeps the work done, not GPU-seconds.
func TestCorrectEndOfAWeightedRunUsesItsSpeed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 1 GPU of speed 2 from 100 to Slurm's 150: 100 units charged.
	done := Record{JobID: 9, Account: priority.Account{ServiceClosed: 100, LastRun: 50}, Finished: 150,
		LastRunStart: 100, LastRunGPUs: 1, LastRunSpeed: 2}
	if err := s.Save([]Record{done}); err != nil {
		t.Fatal(err)
	}
	c, did, err := s.CorrectEnd(9, 130)
	if err != nil || !did || c.Before != 100 || c.After != 60 {
		t.Fatalf("correction: %+v, %v, %v; want 100 -> 60 (20 s less at speed 2)", c, did, err)
	}
}

func TestOpenAddsLastRunColumnsToAnOldLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := `CREATE TABLE completed (job_id INTEGER NOT NULL, finished INTEGER NOT NULL,
		gpu_seconds REAL NOT NULL, PRIMARY KEY (job_id, finished));
		INSERT INTO completed VALUES (3, 50, 99);`
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, old)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, did, err := s.CorrectEnd(3, 1); err != nil || did || c.After != 99 {
		t.Fatalf("old row: %+v, %v, %v; want kept at 99", c, did, err)
	}
	var n int
	if err := s.conn().QueryRow(`SELECT count(*) FROM completed`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows = %d, %v", n, err)
	}
	// Opening again must not fail on the columns it added.
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
}

// A ledger made before preemption reasons existed opens, its active jobs
// read back with no reason, and a reason saved then reads back.
func TestOpenAddsPreemptReasonToAnOldLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := `CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, first_submit INTEGER NOT NULL,
		service_closed REAL NOT NULL, service_base REAL NOT NULL, run_start INTEGER NOT NULL,
		run_gpus INTEGER NOT NULL, run_seconds REAL NOT NULL, last_run REAL NOT NULL,
		runs INTEGER NOT NULL, waiting_since INTEGER NOT NULL, queue INTEGER NOT NULL,
		queue_entry INTEGER NOT NULL, promotions INTEGER NOT NULL, finished INTEGER NOT NULL);
		INSERT INTO jobs VALUES (7, 10, 500, 0, 0, 0, 0, 100, 1, 110, 1, 110, 0, 0);`
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, old)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	active, err := s.Active()
	if err != nil || len(active) != 1 || active[0].JobID != 7 || active[0].ServiceClosed != 500 || active[0].PreemptReason != "" {
		t.Fatalf("old job read back as %+v, %v; want job 7, 500 GPU-s, no reason", active, err)
	}
	active[0].PreemptReason = "preempted by job 8"
	if err := s.Save(active); err != nil {
		t.Fatal(err)
	}
	r, ok, err := s.Get(7)
	if err != nil || !ok || r.PreemptReason != "preempted by job 8" {
		t.Fatalf("reason read back as %q (%v, %v)", r.PreemptReason, ok, err)
	}
}
