package sensitivity

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedData is ../shared/data next to the repository root (the directory
// holding go.mod). The data is part of the project's checkout layout, so a
// missing file is a failure, not a reason to skip.
func sharedData(t testing.TB, rel string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	path := filepath.Join(dir, "..", "shared", "data", rel)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("reference data missing: %v", err)
	}
	return path
}

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
