package progress_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/profiler"
	"github.com/lachesis-sched/lachesis/node-agent/progress"
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
		if got := progress.Duration(tc.in); got != tc.want {
			t.Errorf("Duration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLineShowsBarPointsReadingAndETA(t *testing.T) {
	tests := []struct {
		name string
		p    profiler.Progress
		want []string
	}{
		{"start shows an empty bar", profiler.Progress{Points: 4, ETA: time.Minute, Message: "measuring 8 CPUs"},
			[]string{"[........................] 0/4", "ETA 1m00s", "measuring 8 CPUs"}},
		{"half way shows half a bar and the reading", profiler.Progress{Point: 2, Points: 4, CPUs: 4, Throughput: 12.25, Elapsed: 90 * time.Second, ETA: 90 * time.Second},
			[]string{"[############............] 2/4", "4 CPUs: 12.25/s", "1m30s elapsed, ETA 1m30s"}},
		{"overshoot is capped", profiler.Progress{Point: 9, Points: 4}, []string{"[########################] 9/4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			line := progress.Line(tc.p)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("line %q lacks %q", line, w)
				}
			}
		})
	}
}

func TestTerminalRedrawsOneLine(t *testing.T) {
	var buf bytes.Buffer
	b := progress.New(&buf, true)
	b.Update(profiler.Progress{Points: 2, Message: "a long first message"})
	b.Update(profiler.Progress{Point: 1, Points: 2})
	b.Done()
	out := buf.String()
	if strings.Count(out, "\n") != 1 || strings.Count(out, "\r") != 2 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("output %q", out)
	}
}

func TestLogGetsOneLinePerMessage(t *testing.T) {
	var buf bytes.Buffer
	b := progress.New(&buf, false)
	b.Update(profiler.Progress{Points: 2, Message: "measuring 2 CPUs"})
	b.Update(profiler.Progress{Points: 2, Message: "measuring 2 CPUs"})
	b.Update(profiler.Progress{Point: 1, Points: 2, Message: "2 CPUs: 5"})
	b.Done()
	if n := strings.Count(buf.String(), "\n"); n != 2 || strings.Contains(buf.String(), "\r") {
		t.Fatalf("output %q", buf.String())
	}
}
