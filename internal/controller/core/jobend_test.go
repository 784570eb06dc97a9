package core

import (
	"path/filepath"
	"testing"
)

// A 2-GPU job started at 1000 really ends at 1015 (the node's report);
// slurmctld was down and completes it at its restart, 1035.
func historyAfterOutage(t *testing.T, reportBeforeCompletion bool, reports ...int64) []float64 {
	t.Helper()
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	pass(c, 1007, running(1, 2, 1000, 1000))
	if reportBeforeCompletion {
		for _, end := range reports {
			c.ReportEnd(1, end, "n1")
		}
	}
	pass(c, 1035, running(1, 2, 1000, 1000)) // restarted; not yet told
	fin := Snapshot{ID: 1, State: StateFinished, GPUs: 2, SubmitTime: 1000, StartTime: 1000, EndTime: 1035}
	pass(c, 1036, fin)
	if !reportBeforeCompletion {
		for _, end := range reports {
			c.ReportEnd(1, end, "n1")
		}
	}
	// slurmctld lists a finished job until MinJobAge: later passes see it
	// again and must leave its one history entry as it is.
	pass(c, 1037, fin)
	pass(c, 1038, fin)
	store := closedLedger(t, c, db)
	samples, _, err := store.CompletedGPUTimes(10)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

func TestNodeReportedEndCorrectsTheHistory(t *testing.T) {
	tests := []struct {
		name   string
		before bool
		ends   []int64
		want   float64
	}{
		{"report after completion lowers 70 to 30", false, []int64{1015}, 30},
		{"report before completion lowers 70 to 30", true, []int64{1015}, 30},
		{"repeated report after completion is idempotent", false, []int64{1015, 1015, 1020}, 30},
		{"repeated report before completion keeps the earliest", true, []int64{1020, 1015, 1030}, 30},
		{"late report after completion never raises", false, []int64{1100}, 70},
		{"late report before completion never raises", true, []int64{1100}, 70},
		{"report before the start is ignored", false, []int64{900}, 70},
		{"no report keeps Slurm's end", false, nil, 70},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := historyAfterOutage(t, tc.before, tc.ends...)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("history = %v, want [%v]", got, tc.want)
			}
		})
	}
}

func TestReportForUnknownJobChangesNoHistory(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	pass(c, 1100, running(1, 1, 1000, 1000))
	pass(c, 1200, Snapshot{ID: 1, State: StateFinished, GPUs: 1, SubmitTime: 1000, StartTime: 1000, EndTime: 1150})
	c.ReportEnd(2, 1001, "n1")
	c.ReportEnd(0, 1001, "n1")
	store := closedLedger(t, c, db)
	if s, _, err := store.CompletedGPUTimes(10); err != nil || len(s) != 1 || s[0] != 150 {
		t.Fatalf("history = %v, %v; want [150]", s, err)
	}
}

// slurmctld lists a finished job for MinJobAge; the passes that see it
// again must leave its ledger row as the finishing pass wrote it (both
// runs' service), not rewrite it from a record of its last run alone.
func TestFinishedJobStillListedKeepsItsLedgerRow(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	pass(c, 1050, running(1, 2, 1000, 1000)) // 100 GPU-s
	pass(c, 1060, pending(1, 2, 1060))       // requeued
	pass(c, 1150, running(1, 2, 1060, 1100)) // 100 more
	fin := Snapshot{ID: 1, State: StateFinished, GPUs: 2, SubmitTime: 1060, StartTime: 1100, EndTime: 1150}
	for now := int64(1160); now <= 1400; now += 30 {
		pass(c, now, fin)
	}
	store := closedLedger(t, c, db)
	r, ok, err := store.Get(1)
	if err != nil || !ok || r.Total() != 200 || r.Runs != 2 || r.Finished != 1150 {
		t.Fatalf("ledger row after 9 passes saw the job finished: %+v, %v, %v; want 200 GPU-s over 2 runs, finished 1150", r, ok, err)
	}
	samples, _, err := store.CompletedGPUTimes(10)
	if err != nil || len(samples) != 1 || samples[0] != 200 {
		t.Fatalf("history = %v, %v; want [200]", samples, err)
	}
}
