package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profiler"
)

func TestProgressLineShowsBarPointsReadingAndETA(t *testing.T) {
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
		{"a long message is cut", profiler.Progress{Points: 1, Message: strings.Repeat("m", 80)}, []string{strings.Repeat("m", 57) + "..."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			line := progressLine(tc.p)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("line %q lacks %q", line, w)
				}
			}
		})
	}
}

func TestProgressOnATerminalRedrawsOneLine(t *testing.T) {
	var buf bytes.Buffer
	pp := newProfileProgress(&buf, true)
	pp.update(profiler.Progress{Points: 2, Message: "a long first message"})
	pp.update(profiler.Progress{Point: 1, Points: 2})
	pp.done()
	out := buf.String()
	if strings.Count(out, "\n") != 1 || strings.Count(out, "\r") != 2 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("output %q", out)
	}
}

func TestProgressInALogGetsOneLinePerMessage(t *testing.T) {
	var buf bytes.Buffer
	pp := newProfileProgress(&buf, false)
	pp.update(profiler.Progress{Points: 2, Message: "measuring 2 CPUs"})
	pp.update(profiler.Progress{Points: 2, Message: "measuring 2 CPUs"})
	pp.update(profiler.Progress{Point: 1, Points: 2, Message: "2 CPUs: 5"})
	pp.done()
	if n := strings.Count(buf.String(), "\n"); n != 2 || strings.Contains(buf.String(), "\r") {
		t.Fatalf("output %q", buf.String())
	}
}
