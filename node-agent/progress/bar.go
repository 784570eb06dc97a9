package progress

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/profiler"
)

// barWidth is the number of cells in the bar.
const barWidth = 24

// Bar writes progress to a terminal or a log.
type Bar struct {
	w        io.Writer
	terminal bool
	lastLen  int
	lastMsg  string
}

// New returns a Bar writing to w; terminal selects in-place redrawing.
func New(w io.Writer, terminal bool) *Bar { return &Bar{w: w, terminal: terminal} }

// Update shows p.
func (b *Bar) Update(p profiler.Progress) {
	if !b.terminal {
		if p.Message != "" && p.Message != b.lastMsg {
			fmt.Fprintf(b.w, "%s  [%d/%d points, elapsed %s, ETA %s]\n", p.Message, p.Point, p.Points,
				Duration(p.Elapsed), Duration(p.ETA))
			b.lastMsg = p.Message
		}
		return
	}
	line := Line(p)
	pad := max(b.lastLen-len(line), 0)
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
	b.lastLen = len(line)
}

// Done ends the bar's line on a terminal.
func (b *Bar) Done() {
	if b.terminal && b.lastLen > 0 {
		fmt.Fprintln(b.w)
		b.lastLen = 0
	}
}

// Line renders p as one line: bar, points, last reading, times, message.
func Line(p profiler.Progress) string {
	var sb strings.Builder
	sb.WriteByte('[')
	filled := 0
	if p.Points > 0 {
		filled = min(barWidth*max(p.Point, 0)/p.Points, barWidth)
	}
	sb.WriteString(strings.Repeat("#", filled))
	sb.WriteString(strings.Repeat(".", barWidth-filled))
	fmt.Fprintf(&sb, "] %d/%d", p.Point, p.Points)
	if p.CPUs > 0 {
		fmt.Fprintf(&sb, "  %d CPUs: %.4g/s", p.CPUs, p.Throughput)
	}
	fmt.Fprintf(&sb, "  %s elapsed, ETA %s", Duration(p.Elapsed), Duration(p.ETA))
	if p.Message != "" {
		msg := p.Message
		if len(msg) > 60 {
			msg = msg[:57] + "..."
		}
		sb.WriteString("  ")
		sb.WriteString(msg)
	}
	return sb.String()
}

// Duration formats d for people: 45s, 3m05s, 1h02m.
func Duration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s/60%60)
}
