package trace

import (
	"os"
	"sync"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// refData is the path of rel inside the repository's data/.
func refData(t testing.TB, rel string) string { return refdata.Path(t, rel) }

var (
	phillyOnce  sync.Once
	phillyTrace *Trace
	phillyErr   error
)

// philly is the whole Philly trace, read once per test binary.
func philly(t testing.TB) *Trace {
	t.Helper()
	path := refData(t, "philly/philly_jobs.csv")
	phillyOnce.Do(func() { phillyTrace, phillyErr = Load(path, FormatAuto) })
	if phillyErr != nil {
		t.Fatal(phillyErr)
	}
	return phillyTrace
}

// profiles is Synergy's throughput table, the models a generated job list
// may name.
func profiles(t testing.TB) sensitivity.Profiles {
	t.Helper()
	f, err := os.Open(refData(t, "synergy/synergy_model_throughput.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := sensitivity.ReadThroughputCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
