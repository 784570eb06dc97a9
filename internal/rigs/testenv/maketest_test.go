package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `make test` ends with the slowest cluster tests (scripts/make-test.sh
// slowest). It once failed a run whose every test had passed: head closed
// the pipe after ten lines and, under pipefail, sort's SIGPIPE became the
// run's exit status (141). A log far larger than a pipe's buffer shows it.
func TestSlowestListOfALargeLogExitsZeroInOrder(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < 40000; i++ {
		fmt.Fprintf(&b, "    --- PASS: TestN%d (%d.%02ds)\n", i, i%97, i%100)
	}
	b.WriteString("--- FAIL: TestSlowest (500.00s)\n")
	log := filepath.Join(t.TempDir(), "cluster.log")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", "-o", "pipefail", filepath.Join(root, "scripts", "make-test.sh"), "slowest", log, "3").CombinedOutput()
	if err != nil {
		t.Fatalf("slowest: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "500.0 s  FAIL TestSlowest") || !strings.Contains(lines[1], "97.0 s  PASS") {
		t.Fatalf("want the 3 slowest, slowest first; got:\n%s", out)
	}
}

// `make test` counts each release's cluster tests from its `go test -v`
// log: a test that called notApplicable on that release is listed as not
// applicable with its reason, never counted as passed, and a plain skip
// stays a skip.
func TestCountsTellNotApplicableFromPassedAndSkipped(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	log := `=== RUN   TestA
--- PASS: TestA (1.00s)
=== RUN   TestB
=== RUN   TestB/one
    --- PASS: TestB/one (2.00s)
=== RUN   TestB/two
    x_test.go:10: boom
    --- FAIL: TestB/two (3.00s)
--- FAIL: TestB (5.00s)
=== RUN   TestShares
    release_test.go:21: NOT APPLICABLE TestShares on Slurm 22.05: needs Slurm 23.11 or later: shares of several GPUs
--- SKIP: TestShares (0.00s)
=== RUN   TestNoMunge
    harness_test.go:9: munged is missing
--- SKIP: TestNoMunge (0.00s)
FAIL
`
	path := filepath.Join(t.TempDir(), "cluster.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(root, "scripts", "make-test.sh"), "counts", path).CombinedOutput()
	if err != nil {
		t.Fatalf("counts: %v\n%s", err, out)
	}
	for _, want := range []string{
		"2 passed (1 tests, 1 subtests), 2 failed (1 tests, 1 subtests), 1 not-applicable (1 tests, 0 subtests), 1 skipped (1 tests, 0 subtests)",
		"failed:\n    TestB/two\n    TestB\n",
		"not applicable: TestShares: needs Slurm 23.11 or later: shares of several GPUs",
		"skipped:\n    TestNoMunge",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("counts lacks %q:\n%s", want, out)
		}
	}
}
