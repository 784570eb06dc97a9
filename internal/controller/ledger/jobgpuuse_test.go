package ledger

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
)

// A ledger made before job_gpu_use opens with the table added and its jobs
// kept.
func TestOpenOfALedgerFromBeforeJobGPUUseAddsTheTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := strings.Replace(schema, jobGPUUseSchema, "", 1)
	if old == schema {
		t.Fatal("test needs jobGPUUseSchema in the schema")
	}
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO jobs (job_id, first_submit, service_closed, service_base, run_start, run_gpus,
		run_seconds, last_run, runs, waiting_since, queue, queue_entry, promotions, finished) VALUES (7,1,42,0,0,0,0,0,0,0,0,0,0,0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, ok, err := s.Get(7); err != nil || !ok || r.ServiceClosed != 42 {
		t.Fatalf("old job: %+v %v %v", r, ok, err)
	}
	if err := s.SaveJobGPUUse([]JobGPUUse{{JobID: 7, Samples: 1, UtilSum: 5, LastSeen: 9}}); err != nil {
		t.Fatal(err)
	}
	if u, ok, err := s.JobGPUUseOf(7); err != nil || !ok || u.MeanUtil() != 5 {
		t.Fatalf("row: %+v %v %v", u, ok, err)
	}
}

// The table keeps at most MaxJobGPUUseRows rows: the jobs seen longest
// ago go first.
func TestJobGPUUseIsBounded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows := make([]JobGPUUse, MaxJobGPUUseRows+2)
	for i := range rows {
		rows[i] = JobGPUUse{JobID: uint32(i + 1), Samples: 1, LastSeen: int64(1000 + i), Finished: 1}
	}
	if err := s.SaveJobGPUUse(rows); err != nil {
		t.Fatal(err)
	}
	all, err := s.JobGPUUses(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != MaxJobGPUUseRows || all[0].JobID != uint32(len(rows)) || all[len(all)-1].JobID != 3 {
		t.Fatalf("%d rows, newest %d, oldest %d; want %d rows, 3..%d", len(all), all[0].JobID, all[len(all)-1].JobID, MaxJobGPUUseRows, len(rows))
	}
	if got, _ := s.JobGPUUses(5); len(got) != 5 {
		t.Fatalf("limit 5 gave %d rows", len(got))
	}
}
