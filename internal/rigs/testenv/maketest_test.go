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
