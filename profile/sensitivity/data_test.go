package sensitivity

import (
	"os"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
)

// refData is the path of rel inside the repository's data/.
func refData(t testing.TB, rel string) string { return refdata.Path(t, rel) }

func loadProfiles(t testing.TB) Profiles {
	t.Helper()
	f, err := os.Open(refData(t, "synergy/synergy_model_throughput.csv"))
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
