package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
)

func TestStepdJobID(t *testing.T) {
	for title, want := range map[string]uint32{
		"slurmstepd: [1234.0]\x00\x00":     1234,
		"slurmstepd: [7.batch]":            7,
		"slurmstepd: [9.extern]\x00      ": 9,
		"slurmstepd: [.0]":                 0,
		"slurmstepd: [x.0]":                0,
		"slurmstepd:[5.0]":                 0,
		"/usr/sbin/slurmstepd":             0,
		"python train.py":                  0,
		"slurmstepd: [99999999999.0]":      0,
	} {
		if got := stepdJobID(title); got != want {
			t.Errorf("stepdJobID(%q) = %d, want %d", title, got, want)
		}
	}
}

// Slurm's answers become the caller's job owner or ErrNoJob: squeue that
// names nobody, or refuses, means no job of the caller's here.
func TestSlurmJobOwnerMapsSlurmsAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		uid          uint32
		noJob, fails bool
	}{
		{"one uid", `echo 1001`, 1001, false, false},
		{"nothing: not running here", `true`, 0, true, true},
		{"squeue refuses", `echo 'squeue: error: Invalid job id specified' >&2; exit 1`, 0, true, true},
		{"two answers", `echo 1001; echo 1002`, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "squeue"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			uid, err := slurmJobOwner(slurmcmd.Runner{Dir: dir})(context.Background(), 5, "lnode1")
			if uid != tc.uid || (err != nil) != tc.fails || errors.Is(err, ErrNoJob) != tc.noJob {
				t.Fatalf("got %d, %v", uid, err)
			}
		})
	}
}

// The test process is in no Slurm step: a process that only calls itself
// slurmstepd (its own title) is not one.
func TestStepdOf_ATitleIsNotAStep(t *testing.T) {
	if id, pid := stepdOf(os.Getpid()); id != 0 || pid != 0 {
		t.Fatalf("the test process is in job %d (stepd %d)", id, pid)
	}
}
