package ledger

import (
	"path/filepath"
	"testing"
)

// A user's history of a model keeps its newest MaxModelJobUsePerKey jobs;
// another user's history of the same model is apart and untouched.
func TestModelJobUseKeepsTheNewestJobsPerUserAndModel(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rows []ModelJobUse
	for i := range MaxModelJobUsePerKey + 3 {
		rows = append(rows, ModelJobUse{User: 1000, Model: "bert", JobID: uint32(10 + i), UtilPeak: 20, MemPeakMB: 900, Samples: 5, Finished: int64(100 + i)})
	}
	rows = append(rows, ModelJobUse{User: 1001, Model: "bert", JobID: 99, UtilPeak: 95, MemPeakMB: 30000, Samples: 9, Finished: 50})
	if err := s.SaveModelJobUse(rows); err != nil {
		t.Fatal(err)
	}
	got, err := s.ModelJobUses()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxModelJobUsePerKey+1 {
		t.Fatalf("%d rows, want %d: %+v", len(got), MaxModelJobUsePerKey+1, got)
	}
	if got[0] != rows[len(rows)-1] {
		t.Fatalf("oldest row %+v; want the other user's %+v", got[0], rows[len(rows)-1])
	}
	if got[1].JobID != 13 || got[len(got)-1].JobID != uint32(10+MaxModelJobUsePerKey+2) {
		t.Fatalf("user 1000 kept jobs %d..%d; want 13..%d", got[1].JobID, got[len(got)-1].JobID, 10+MaxModelJobUsePerKey+2)
	}
}
