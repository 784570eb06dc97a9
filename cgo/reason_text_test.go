//go:build cgo

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The plugins' rule for reasons appended to an AdminComment
// (slurmctld-hook/reason_text.h) needs no Slurm: a C program tests it.
func TestReasonTextC(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	bin := filepath.Join(t.TempDir(), "reason_text_test")
	hook := filepath.Join("..", "slurmctld-hook")
	build := exec.Command(cc, "-O1", "-g", "-Wall", "-Werror", "-I"+hook, "-o", bin, filepath.Join(hook, "reason_text_test.c"))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the C test: %v\n%s", err, out)
	}
	run := exec.Command(bin)
	run.Stderr = os.Stderr
	if out, err := run.Output(); err != nil {
		t.Fatalf("C test: %v\n%s", err, out)
	}
}
