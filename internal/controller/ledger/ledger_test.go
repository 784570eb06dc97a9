package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

func TestSaveThenReadBackActiveAndCompleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	running := Record{JobID: 1, FirstSubmit: 10, Account: priority.Account{ServiceClosed: 100, RunOpen: true, RunStart: 50, RunGPUs: 2, RunSeconds: 30, Runs: 3, Preemptions: 1, Queue: 1, Upgraded: 77}}
	done := Record{JobID: 2, FirstSubmit: 5, Account: priority.Account{ServiceClosed: 40}, Finished: 99}
	if err := s.Save([]Record{running, done}); err != nil {
		t.Fatal(err)
	}
	// Saving the same completion again must not count it twice.
	if err := s.Save([]Record{done}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	active, err := ro.Active()
	if err != nil || len(active) != 1 || active[0] != running {
		t.Fatalf("Active() = %+v, %v; want only job 1 as saved", active, err)
	}
	if got := active[0].Total(); got != 160 {
		t.Fatalf("Total() = %v, want 100 closed + 2 GPUs × 30 s = 160", got)
	}
	samples, total, err := ro.CompletedGPUTimes(10)
	if err != nil || total != 1 || len(samples) != 1 || samples[0] != 40 {
		t.Fatalf("CompletedGPUTimes = %v, %d, %v; want one sample of 40", samples, total, err)
	}
	if _, ok, err := ro.Get(3); ok || err != nil {
		t.Fatalf("Get(unknown) = %v, %v; want not found", ok, err)
	}
}

func TestOpenReadOnlyOfAMissingFileFails(t *testing.T) {
	if _, err := OpenReadOnly(filepath.Join(t.TempDir(), "absent.db")); err == nil {
		t.Fatal("opened a ledger that does not exist")
	}
}

func TestFilesArePrivateAndOwnedBySlurmUser(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil { // as earlier versions left it
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"new file is 0600", filepath.Join(dir, "new.db")},
		{"existing 0644 file is tightened to 0600", old},
	}
	const uid = 65534
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenOwned(tt.path, uid)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Save([]Record{{JobID: 1}}); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{tt.path, tt.path + "-wal", tt.path + "-shm"} {
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s mode = %v, want 0600", p, fi.Mode().Perm())
				}
				if os.Geteuid() == 0 {
					if got := fi.Sys().(*syscall.Stat_t).Uid; got != uid {
						t.Errorf("%s owner = %d, want %d", p, got, uid)
					}
				}
			}
		})
	}
}

func TestCheckFileNoticesDeletionAndReopenRecreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckFile(); err != nil {
		t.Fatalf("fresh file reported as replaced: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckFile(); !errors.Is(err, ErrReplaced) || !errors.Is(err, ErrStore) {
		t.Fatalf("CheckFile after rm = %v, want ErrReplaced and ErrStore", err)
	}
	if err := s.Reopen(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckFile(); err != nil {
		t.Fatalf("reopened file reported as replaced: %v", err)
	}
	if err := s.Save([]Record{{JobID: 7, Account: priority.Account{ServiceClosed: 5}}}); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, ok, err := ro.Get(7); err != nil || !ok || r.ServiceClosed != 5 {
		t.Fatalf("record in the recreated file = %+v, %v, %v", r, ok, err)
	}
}
