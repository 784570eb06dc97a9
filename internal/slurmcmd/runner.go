package slurmcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lachesis-sched/lachesis/internal/util/printable"
)

// Bounds of one command.
const (
	// DefaultTimeout bounds a command when Runner.Timeout is 0. Callers
	// that ask for less bound their context.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxOutput bounds a command's stdout when Runner.MaxOutput is
	// 0: far above any answer Lachesis asks for (one job's fields, one
	// node's line, one host list).
	DefaultMaxOutput = 1 << 20
	// maxStderr bounds what is kept of a command's stderr, and
	// maxErrText what of it an error carries.
	maxStderr  = 16 << 10
	maxErrText = 512
	// waitDelay bounds the wait for the pipes once the command is killed
	// or has exited: a child it left behind holding them open is not
	// waited for.
	waitDelay = 2 * time.Second
)

// Runner runs Slurm's client commands. The zero value finds them on PATH
// (as slurmctld's and the agent's environment sets it) with the default
// bounds.
type Runner struct {
	// Dir is the folder of Slurm's commands; "" finds them on PATH.
	Dir string
	// Timeout bounds one command on top of the caller's context; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// MaxOutput bounds one command's stdout in bytes; 0 means
	// DefaultMaxOutput.
	MaxOutput int
}

// ErrOutputTooLarge: a command wrote more than Runner.MaxOutput on stdout.
var ErrOutputTooLarge = errors.New("output over the bound")

// ExitError is a command that ran and failed: it exited non-zero, or was
// killed (its timeout, or the caller's context, ended it).
type ExitError struct {
	// Command is the command line as run, for messages.
	Command string
	// Err is the exit (an *exec.ExitError) and, where the command was
	// killed for it, the context's error.
	Err error
	// Stderr is what the command said on stderr: trimmed, lines joined by
	// "; ", control characters removed, at most maxErrText bytes.
	Stderr string
}

func (e *ExitError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("%s: %v", e.Command, e.Err)
	}
	return fmt.Sprintf("%s: %v: %s", e.Command, e.Err, e.Stderr)
}

func (e *ExitError) Unwrap() error { return e.Err }

// Run runs name (a Slurm command) with args, no shell, and returns its
// stdout, in the caller's environment less SLURM_TOPO_LEN (which cuts
// scontrol's topology lines short: an answer is read whole or not at all). A command that cannot start fails with an error wrapping exec's;
// one that fails with an *ExitError; one that writes more than the bound
// with ErrOutputTooLarge.
func (r Runner) Run(ctx context.Context, name string, args ...string) (string, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	limit := r.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := name
	if r.Dir != "" {
		path = filepath.Join(r.Dir, name)
	}
	line := commandLine(name, args)
	cmd := exec.CommandContext(ctx, path, args...)
	stdout, stderr := &boundedBuffer{limit: limit}, &boundedBuffer{limit: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SLURM_TOPO_LEN=") })
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		why := err
		if cerr := ctx.Err(); cerr != nil {
			why = fmt.Errorf("%w (%w)", err, cerr)
		}
		return "", &ExitError{Command: line, Err: why, Stderr: errText(stderr.b)}
	case err != nil:
		return "", fmt.Errorf("%s: %w", line, err)
	case stdout.over:
		return "", fmt.Errorf("%s: %w (%d bytes)", line, ErrOutputTooLarge, limit)
	}
	return string(stdout.b), nil
}

// commandLine is name and args for messages, each arg cleaned and the
// whole bounded.
func commandLine(name string, args []string) string {
	return cut(printable.String(strings.Join(append([]string{name}, args...), " ")), maxErrText)
}

// errText is a command's stderr as an error carries it.
func errText(b []byte) string {
	lines := strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	lines = slices.DeleteFunc(lines, func(l string) bool { return l == "" })
	return cut(printable.String(strings.Join(lines, "; ")), maxErrText)
}

// cut is s bounded to n bytes on a rune boundary, "…" marking a cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// boundedBuffer keeps the first limit bytes written to it and notes that
// more came; it never refuses a write, so the command is not killed by a
// broken pipe before its exit status is known.
type boundedBuffer struct {
	b     []byte
	limit int
	over  bool
}

func (l *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := l.limit - len(l.b); room < len(p) {
		l.over = true
		p = p[:max(room, 0)]
	}
	l.b = append(l.b, p...)
	return n, nil
}
