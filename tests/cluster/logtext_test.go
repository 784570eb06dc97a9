package cluster_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestUserTextCannotForgeSlurmctldLogLines (34.8): an ordinary user names
// jobs (-J) and their models (--comment=model=) with newlines, carriage
// returns and terminal escape sequences, spelling a "lachesis:" line of
// their own. Lachesis logs a job's model when its run is weighted
// (effective_service) and when Synergy sizes it; those values used to be
// quoted only when they held a space, tab, '"' or '=', so the text reached
// slurmctld's log raw: a forged line, a cleared line, a retitled admin
// terminal. Now every value is quoted with its control characters
// escaped, and so is any message.
func TestUserTextCannotForgeSlurmctldLogLines(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  effective_service: true\n", "JobSubmitPlugins=synergy")
	// No space, tab, '"' or '=': what the old quoting let through.
	byName := "x\nlachesis:FORGED-NAME\r\x1b[2K\x1b]0;owned\x07"
	// The comment's tokens end at a newline; a carriage return puts the
	// rest over the start of the line on a terminal.
	byModel := "model=y\rlachesis:FORGED-MODEL\x1b[31m\u202e\u0085"
	ids := []uint32{
		e.submitAs("-J", byName, "--gpus=1", "--wrap", "sleep 600"),
		e.submitAs("-J", "plain", "--comment="+byModel, "--gpus=1", "--wrap", "sleep 600"),
	}
	for _, id := range ids {
		// squeue's listing of every job would print the names raw.
		e.eventually(30*time.Second, fmt.Sprintf("job %d to run", id), func() (bool, string) {
			out, err := e.c.Run("squeue", "-h", "-j", fmt.Sprint(id), "-o", "%T")
			return err == nil && strings.TrimSpace(out) == "RUNNING", out
		})
		e.eventually(15*time.Second, fmt.Sprintf("job %d's run weighted in slurmctld's log", id), func() (bool, string) {
			return e.logMatches(fmt.Sprintf(`effective service: run weighted .*job_id=%d\b`, id)), ""
		})
	}
	log := e.c.ControllerLog()
	for _, want := range []string{`model="x\nlachesis:forged-name\r\x1b[2k\x1b]0;owned\a"`,
		`model="y\rlachesis:forged-model\x1b[31m\u202e\u0085"`} {
		if !strings.Contains(log, want) {
			t.Errorf("slurmctld's log does not show the model escaped as %s", want)
		}
	}
	forged := regexp.MustCompile(`(?i)forged-(name|model)`)
	for i, line := range strings.Split(log, "\n") {
		if forged.MatchString(line) && !strings.HasPrefix(line, "[") {
			t.Errorf("slurmctld's log line %d is the user's, not slurmctld's: %q", i+1, line)
		}
	}
	for _, b := range []byte{'\r', 0x1b, 0x07} {
		if i := strings.IndexByte(log, b); i >= 0 {
			t.Errorf("slurmctld's log holds a raw %#02x byte: %q", b, log[max(0, i-80):min(len(log), i+40)])
		}
	}
	for _, r := range []string{"\u202e", "\u0085"} {
		if strings.Contains(log, r) {
			t.Errorf("slurmctld's log holds a raw %q", r)
		}
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is down")
	}
}
