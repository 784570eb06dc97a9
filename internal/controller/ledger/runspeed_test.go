package ledger

import (
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A ledger made before effective service has no run_speed column: opening
// it adds the column, its open runs read speed 0 (plain GPU-seconds, as
// they were charged) and a speed saved afterwards is read back.
func TestLedgerWithoutRunSpeedIsMigratedAndKeepsItsRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, `
CREATE TABLE jobs (
	job_id INTEGER PRIMARY KEY, first_submit INTEGER NOT NULL, service_closed REAL NOT NULL,
	service_base REAL NOT NULL, run_start INTEGER NOT NULL, run_gpus INTEGER NOT NULL,
	run_seconds REAL NOT NULL, last_run REAL NOT NULL, runs INTEGER NOT NULL,
	waiting_since INTEGER NOT NULL, queue INTEGER NOT NULL, queue_entry INTEGER NOT NULL,
	promotions INTEGER NOT NULL, finished INTEGER NOT NULL, preempt_reason TEXT NOT NULL DEFAULT '');
INSERT INTO jobs VALUES (9, 1, 10, 0, 100, 2, 30, 0, 1, 1, 0, 1, 0, 0, '');`)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatalf("opening a ledger without run_speed: %v", err)
	}
	active, err := s.Active()
	if err != nil || len(active) != 1 {
		t.Fatalf("active = %+v, %v; want the old job", active, err)
	}
	r := active[0]
	if r.RunSpeed != 0 || !r.RunOpen || r.Total() != 10+2*30 {
		t.Fatalf("old job read as %+v (total %v), want speed 0 and 70 GPU-s", r.Account, r.Total())
	}
	r.Account.SetRunSpeed(2)
	if err := s.Save([]Record{r}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(path) // a second open finds the column there already
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, ok, err := s.Get(9)
	if err != nil || !ok || got.RunSpeed != 2 || got.Total() != 10+priority.EffectiveRate(2, 2)*30 {
		t.Fatalf("job after save = %+v, %v, %v; want speed 2 and 130 effective GPU-s", got.Account, ok, err)
	}
}
