package core

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

var errDiskFull = errors.New("disk full (test)")

// flakyStore is a real SQLite ledger whose writes fail while fail is set;
// attempts receives a value after each failed write.
type flakyStore struct {
	*ledger.SQLite
	fail     atomic.Bool
	attempts chan struct{}
}

func (f *flakyStore) Save(r []ledger.Record) error {
	if f.fail.Load() {
		select {
		case f.attempts <- struct{}{}:
		default:
		}
		return errDiskFull
	}
	return f.SQLite.Save(r)
}

func readBack(t *testing.T, db string, id uint32) (ledger.Record, bool) {
	t.Helper()
	ro, err := ledger.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r, ok, err := ro.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return r, ok
}

func TestFailedWritesAreKeptUntilTheyLand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	sq, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	fs := &flakyStore{SQLite: sq, attempts: make(chan struct{}, 1)}
	fs.fail.Store(true)
	c, err := New(testConfig(db), fs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// The first pass's batch is the only one that holds job 2: it is
	// pending and unchanged afterwards, so it is never queued again.
	pass(c, 1100, running(1, 2, 1000, 1000), pending(2, 1, 1050))
	<-fs.attempts // that batch failed
	fs.fail.Store(false)
	pass(c, 1150, running(1, 2, 1000, 1000), pending(2, 1, 1050))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		id   uint32
		want float64
	}{
		{"job 1 lands with its newest service", 1, 300},
		{"job 2, only ever in the failed batch, lands too", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := readBack(t, db, tt.id)
			if !ok {
				t.Fatalf("job %d never reached the ledger", tt.id)
			}
			if r.Total() != tt.want {
				t.Fatalf("job %d service = %v, want %v", tt.id, r.Total(), tt.want)
			}
		})
	}
}

func TestDeletedLedgerIsRecreatedWithEveryActiveJob(t *testing.T) {
	tests := []struct {
		name    string
		replace func(t *testing.T, db string)
	}{
		{"deleted file is recreated", func(t *testing.T, db string) {
			for _, p := range []string{db, db + "-wal", db + "-shm"} {
				if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
			}
		}},
		{"file replaced by an empty one is refilled", func(t *testing.T, db string) {
			if err := os.Rename(db, db+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(db, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			c := openCore(t, db)
			// Job 1 ran 200 GPU-s and was requeued: only the ledger knows
			// its service now (Slurm's snapshot shows a fresh pending job).
			pass(c, 1100, running(1, 2, 1000, 1000), pending(2, 1, 1100))
			snaps := []Snapshot{pending(1, 2, 1105), pending(2, 1, 1100), running(3, 1, 1050, 1060)}
			before := pass(c, 1300, snaps...)
			if before[0].Service != 200 {
				t.Fatalf("job 1 service before = %v, want 200", before[0].Service)
			}
			tt.replace(t, db)
			// No job changes: the rewrite alone must restore them.
			if err := c.Close(); err != nil { // the last flush checks the file
				t.Fatal(err)
			}
			c2 := openCore(t, db)
			defer c2.Close()
			after := pass(c2, 1300, snaps...)
			for i := range before {
				if before[i].Service != after[i].Service || before[i].Queue != after[i].Queue {
					t.Fatalf("job %d: before %+v, after %+v", snaps[i].ID, before[i], after[i])
				}
			}
		})
	}
}
