// Package testenv decides what a test does when the machine lacks
// something it needs (root, munged): on a developer's machine it skips,
// saying why; in CI (CI set in the environment, as .ci/run's runner sets
// it) it fails, because CI is supposed to provide everything and a skipped
// test must never pass for a tested one.
package testenv

import (
	"os"
	"testing"
)

// Unavailable skips t locally and fails it in CI.
func Unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must provide this but does not: %s", why)
	}
	t.Skip(why)
}
