// Package shareddata locates the project's reference data for tests:
// ../shared/data next to the repository root (the directory holding go.mod).
// The data is part of the checkout layout CI provides, so a missing file
// fails the test instead of skipping it.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// Path returns the path of rel inside ../shared/data, failing t if the
// repository root or the file cannot be found.
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
	path := filepath.Join(dir, "..", "shared", "data", rel)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("reference data missing: %v", err)
	}
	return path
}
