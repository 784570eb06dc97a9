package core

import (
	"math"
	"os"
	"testing"
	"unsafe"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// unsafeData is the address of a string's bytes, to tell interned strings
// from equal copies.
func unsafeData(s string) *byte { return unsafe.StringData(s) }

// leastAllocs is testing.AllocsPerRun's least over a few attempts.
// AllocsPerRun counts every goroutine's allocations, and other tests'
// background writers may still be running; code that allocates does so in
// every attempt, so the least is the measure of f alone.
func leastAllocs(runs int, f func()) float64 {
	least := math.Inf(1)
	for range 5 {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}
