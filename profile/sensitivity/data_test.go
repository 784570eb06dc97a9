package sensitivity

import (
	"os"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/shareddata"
)

// sharedData is the path of rel inside ../shared/data.
func sharedData(t testing.TB, rel string) string { return shareddata.Path(t, rel) }

func loadProfiles(t testing.TB) Profiles {
	t.Helper()
	f, err := os.Open(sharedData(t, "synergy/synergy_model_throughput.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := ReadThroughputCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
