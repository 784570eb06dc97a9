package report

import (
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
	"github.com/lachesis-sched/lachesis/sim"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// phillySlice is a busy stretch of the Philly trace small enough for unit
// tests (the same stretch as the engine's tests use).
func phillySlice(t testing.TB, jobs int) *sim.Trace {
	t.Helper()
	ph, err := trace.Load(refdata.Path(t, "philly/philly_jobs.csv"), trace.FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ph.Select(trace.Filter{FromSec: 28 * 86400, Limit: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
