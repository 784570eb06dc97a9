// Package refdata locates the reference data that ships with the repository
// (data/ at its root, the directory holding go.mod) for tests. The data is
// part of every checkout, so a missing file fails the test instead of
// skipping it.
package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns the path of rel inside the repository's data/, failing t if
// the repository root or the file cannot be found.
func Path(t testing.TB, rel string) string {
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
	path := filepath.Join(dir, "data", rel)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("reference data missing: %v", err)
	}
	return path
}
