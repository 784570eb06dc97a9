package slurmcmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"
)

// standIn writes an executable stand-in for a Slurm command into a new
// folder and returns a Runner that runs from it.
func standIn(t *testing.T, name, script string) Runner {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return Runner{Dir: dir}
}

func TestRunReturnsStdoutAlone(t *testing.T) {
	r := standIn(t, "squeue", `echo "out $*"; echo warning >&2`)
	out, err := r.Run(context.Background(), "squeue", "-h", "-j", "5")
	if err != nil || out != "out -h -j 5\n" {
		t.Fatalf("got %q, %v", out, err)
	}
}

// Arguments reach the command as they are: no shell reads them.
func TestRunPassesArgumentsWithoutAShell(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	r := standIn(t, "scontrol", `printf '%s|' "$@"`)
	arg := "$(touch " + marker + ");touch " + marker
	out, err := r.Run(context.Background(), "scontrol", arg, "a b")
	if err != nil || out != arg+"|a b|" {
		t.Fatalf("got %q, %v", out, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("an argument was run by a shell")
	}
}

func TestRunRefusesOutputOverTheBound(t *testing.T) {
	r := standIn(t, "squeue", `head -c 3000000 /dev/zero`)
	out, err := r.Run(context.Background(), "squeue")
	if !errors.Is(err, ErrOutputTooLarge) || out != "" {
		t.Fatalf("got %d bytes, %v; want ErrOutputTooLarge", len(out), err)
	}
	r = Runner{Dir: r.Dir, MaxOutput: 10}
	if _, err := r.Run(context.Background(), "squeue"); !errors.Is(err, ErrOutputTooLarge) {
		t.Fatalf("MaxOutput 10: got %v", err)
	}
}

// A failure carries what the command said on stderr, cleaned of control
// characters (a terminal escape, a forged log line) and bounded.
func TestRunPutsStderrCleanedAndBoundedIntoTheError(t *testing.T) {
	r := standIn(t, "scontrol", `printf 'scontrol: error: Invalid job id\n\033]0;owned\007\nlevel=ERROR msg=forged\n'; head -c 100000 /dev/zero | tr '\0' x; exit 1`)
	// stdout, not stderr: nothing of it in the error.
	if _, err := r.Run(context.Background(), "scontrol"); err == nil || strings.Contains(err.Error(), "Invalid") {
		t.Fatalf("stdout in the error: %v", err)
	}
	r = standIn(t, "scontrol", `{ printf 'scontrol: error: Invalid job id\n\033]0;owned\007\nlevel=ERROR msg=forged\n'; head -c 100000 /dev/zero | tr '\0' x; } >&2; exit 1`)
	_, err := r.Run(context.Background(), "scontrol", "requeue", "7")
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("got %v, want an ExitError", err)
	}
	if !strings.HasPrefix(exit.Stderr, "scontrol: error: Invalid job id; ]0;owned; level=ERROR msg=forged; xxx") {
		t.Fatalf("stderr kept as %q", exit.Stderr)
	}
	if len(exit.Stderr) > maxErrText+len("…") {
		t.Fatalf("stderr of %d bytes kept", len(exit.Stderr))
	}
	if strings.ContainsFunc(err.Error(), unicode.IsControl) {
		t.Fatalf("control characters in %q", err)
	}
	if !strings.HasPrefix(err.Error(), "scontrol requeue 7: exit status 1: scontrol: error:") {
		t.Fatalf("error reads %q", err)
	}
}

func TestRunKillsACommandAtItsTimeout(t *testing.T) {
	r := standIn(t, "squeue", `exec sleep 30`)
	r.Timeout = 100 * time.Millisecond
	start := time.Now()
	_, err := r.Run(context.Background(), "squeue")
	var exit *ExitError
	if !errors.As(err, &exit) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want an ExitError for the deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("returned after %v", d)
	}
}

func TestRunStopsWhenTheCallerCancels(t *testing.T) {
	r := standIn(t, "squeue", `exec sleep 30`)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := r.Run(ctx, "squeue"); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("returned after %v", d)
	}
}

// A command that exits leaving a child with its stdout open does not keep
// the caller waiting for the child.
func TestRunDoesNotWaitForAChildHoldingThePipe(t *testing.T) {
	r := standIn(t, "scontrol", `sleep 30 & echo started`)
	start := time.Now()
	_, err := r.Run(context.Background(), "scontrol")
	if d := time.Since(start); d > waitDelay+5*time.Second {
		t.Fatalf("returned after %v (%v)", d, err)
	}
}

func TestRunSaysACommandIsMissing(t *testing.T) {
	r := Runner{Dir: t.TempDir()}
	_, err := r.Run(context.Background(), "squeue", "-h")
	var exit *ExitError
	if err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "squeue -h") {
		t.Fatalf("got %v, want a start failure naming the command", err)
	}
}

func TestCutKeepsWholeRunes(t *testing.T) {
	if got := cut("ab模型", 3); got != "ab…" {
		t.Fatalf("got %q", got)
	}
	if got := cut("abc", 3); got != "abc" {
		t.Fatalf("got %q", got)
	}
}
