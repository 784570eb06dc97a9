package progressbar_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/progressbar"
)

func TestDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {45 * time.Second, "45s"}, {185 * time.Second, "3m05s"},
		{3720 * time.Second, "1h02m"}, {1499 * time.Millisecond, "1s"},
	}
	for _, tc := range tests {
		if got := progressbar.Duration(tc.in); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBar(t *testing.T) {
	tests := []struct {
		name               string
		done, total, width int
		want               string
	}{
		{"nothing done gives an empty bar", 0, 4, 8, "[........]"},
		{"half done gives half a bar", 2, 4, 8, "[####....]"},
		{"overshoot is capped at a full bar", 9, 4, 8, "[########]"},
		{"negative progress gives an empty bar", -1, 4, 8, "[........]"},
		{"no total gives an empty bar", 3, 0, 4, "[....]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := progressbar.Bar(tc.done, tc.total, tc.width); got != tc.want {
				t.Fatalf("Bar(%d, %d, %d) = %q, want %q", tc.done, tc.total, tc.width, got, tc.want)
			}
		})
	}
}

func TestLineRedrawsInPlaceAndBlanksLeftovers(t *testing.T) {
	var buf bytes.Buffer
	l := progressbar.NewLine(&buf)
	l.Draw("a long first text")
	l.Draw("short")
	l.End()
	l.End() // a second End writes nothing
	want := "\ra long first text\rshort" + strings.Repeat(" ", len("a long first text")-len("short")) + "\n"
	if buf.String() != want {
		t.Fatalf("output %q, want %q", buf.String(), want)
	}
}

func TestLineEndWithoutDrawWritesNothing(t *testing.T) {
	var buf bytes.Buffer
	progressbar.NewLine(&buf).End()
	if buf.Len() != 0 {
		t.Fatalf("output %q, want none", buf.String())
	}
}

func TestCounterDrawsProgressAndEndsTheLine(t *testing.T) {
	var buf bytes.Buffer
	c := progressbar.NewCounter(&buf, "simulating", "jobs", 200)
	c.Add(100)
	c.Add(100)
	c.Finish()
	out := buf.String()
	if !strings.Contains(out, "simulating [###############...............]  50% 100/200 jobs") ||
		!strings.Contains(out, "100% 200/200 jobs") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("counter output %q", out)
	}
}

func TestIsTerminalIsTrueForACharacterDevice(t *testing.T) {
	f, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if !progressbar.IsTerminal(f) {
		t.Fatal("a character device not taken for a terminal")
	}
}

func TestIsTerminalIsFalseForAFileAndABuffer(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if progressbar.IsTerminal(f) || progressbar.IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a regular file or a buffer taken for a terminal")
	}
}
