package ledger

import (
	"reflect"
	"testing"
)

// Each user's history of each model folds to its job count and peaks,
// the one with the newest job first; one user's jobs never join
// another's history of the same model.
func TestModelHistoriesFoldPeaksPerUserAndModel(t *testing.T) {
	got := ModelHistories([]ModelJobUse{
		{User: 1, Model: "bert", JobID: 1, UtilPeak: 20, MemPeakMB: 2048, Finished: 1000},
		{User: 1, Model: "bert", JobID: 2, UtilPeak: 35, MemPeakMB: 1024, Finished: 1100},
		{User: 2, Model: "bert", JobID: 3, UtilPeak: 90, MemPeakMB: 512, Finished: 1050},
		{User: 1, Model: "gnmt", JobID: 4, UtilPeak: 5, MemPeakMB: 100, Finished: 1100},
	})
	want := []ModelHistory{
		{User: 1, Model: "bert", Jobs: 2, UtilPeak: 35, MemPeakMB: 2048, LastFinished: 1100},
		{User: 1, Model: "gnmt", Jobs: 1, UtilPeak: 5, MemPeakMB: 100, LastFinished: 1100},
		{User: 2, Model: "bert", Jobs: 1, UtilPeak: 90, MemPeakMB: 512, LastFinished: 1050},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got := ModelHistories(nil); len(got) != 0 {
		t.Fatalf("no rows: got %+v", got)
	}
}

// The idle rule at another threshold than the tracked one: higher counts
// a job idle at its own; lower only one whose samples since stayed under.
func TestIdleAtAnotherThreshold(t *testing.T) {
	idle := JobGPUUse{IdleBelowPct: 5, IdleSince: 1000, IdlePeak: 3}
	for _, tc := range []struct {
		name  string
		u     JobGPUUse
		below float64
		now   int64
		want  bool
	}{
		{"at its own threshold, long enough: idle", idle, 5, 2000, true},
		{"at its own threshold, too soon: not", idle, 5, 1500, false},
		{"higher: idle as at its own", idle, 20, 2000, true},
		{"lower, above its peak since: idle", idle, 4, 2000, true},
		{"lower, at or under its peak since: not", idle, 3, 2000, false},
		{"finished: never", JobGPUUse{IdleBelowPct: 5, IdleSince: 1000, Finished: 1900}, 5, 2000, false},
		{"never idle: never", JobGPUUse{IdleBelowPct: 5}, 50, 2000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.u.IdleAt(tc.below, tc.now, 600); got != tc.want {
				t.Fatalf("IdleAt(%g, %d) = %v", tc.below, tc.now, got)
			}
		})
	}
}
