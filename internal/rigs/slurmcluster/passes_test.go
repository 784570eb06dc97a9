package slurmcluster

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The pass line's format lives in C; a changed format must fail here, not
// leave lachesis-ctldbench and the cluster tests counting zero passes.
func TestPassLineMatchesThePluginsFormat(t *testing.T) {
	src, err := os.ReadFile("../../../slurmctld-hook/priority_tiresias.c")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`verbose\("(%s: pass ranked[^"]*)",\s*plugin_type,([^;]*)\);`).FindSubmatch(src)
	if m == nil {
		t.Fatal("priority_tiresias.c has no verbose() line for the pass (\"pass ranked ...\", plugin_type, ..., TIME_STR)")
	}
	format, args := string(m[1]), strings.Split(string(m[2]), ",")
	if last := strings.TrimSpace(args[len(args)-1]); last != "TIME_STR" {
		t.Fatalf("the pass line ends with %s, not TIME_STR (usec=N): %q", last, format)
	}
	// C's %d and %s print as Go's do here; TIME_STR is Slurm's "usec=%ld".
	vals := []any{"priority/tiresias"}
	for range args[:len(args)-1] {
		vals = append(vals, 7)
	}
	vals = append(vals, "usec=1234")
	line := "[2026-01-01T00:00:00.000] " + fmt.Sprintf(format, vals...) + "\n"
	if strings.Contains(line, "%!") {
		t.Fatalf("cannot render %q with %d arguments: %s", format, len(vals), line)
	}
	got := PassTimes(line + line)
	if len(got) != 2 || got[0] != 1234*time.Microsecond {
		t.Fatalf("PassTimes(%q) = %v; want two passes of 1.234ms", line, got)
	}
}
