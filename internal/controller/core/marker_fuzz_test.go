package core

import (
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// The marker comes back from Slurm's saved job state, so it is parsed as
// hostile input: whatever the text, parsing must not panic, and what it
// accepts must be service a job could have had (finite, not negative) and
// must survive a round trip.
func FuzzParseMarker(f *testing.F) {
	f.Add(markerOf(&ledger.Record{FirstSubmit: 1000, Account: priority.Account{ServiceClosed: 200.5, ServiceBase: 10,
		LastRun: 100, Queue: 1, Runs: 2, Promotions: 1, RunOpen: true, RunStart: 1200, RunGPUs: 4}}).String())
	f.Add(MarkerPrefix + "sc=NaN sb=0 lr=0 q=0 r=0 p=0 fs=0 rs=0 rg=0")
	f.Add(MarkerPrefix + "sc=1e309 sb=0 lr=0 q=0 r=0 p=0 fs=0 rs=0 rg=0")
	f.Add(MarkerPrefix + "sc=-1 sb=0 lr=0 q=-3 r=0 p=0 fs=0 rs=0 rg=99999999999")
	f.Add("admin text; " + MarkerPrefix)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseMarker(s)
		if err != nil {
			return
		}
		if !finiteNonNegative(m.closed, m.base, m.lastRun) || m.queue < 0 || m.runs < 0 || m.promos < 0 {
			t.Fatalf("accepted %q as %+v", s, m)
		}
		again, err := parseMarker(m.String())
		if err != nil || again != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, again, err)
		}
	})
}
