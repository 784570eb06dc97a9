package ledger

import (
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/priority"
)

func TestSaveThenReadBackActiveAndCompleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	running := Record{JobID: 1, FirstSubmit: 10, Account: priority.Account{ServiceClosed: 100, RunOpen: true, RunStart: 50, RunGPUs: 2, RunSeconds: 30, Runs: 2, Queue: 1}}
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
