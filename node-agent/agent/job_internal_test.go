package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
)

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
