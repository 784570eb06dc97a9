package progressbar

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// IsTerminal reports whether w is a terminal, where a line can be redrawn
// in place; a log or a pipe wants plain lines instead.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Line is one terminal line, redrawn in place.
type Line struct {
	w       io.Writer
	lastLen int
}

// NewLine returns a Line on w.
func NewLine(w io.Writer) *Line { return &Line{w: w} }

// Draw replaces the line's text with s, blanking what a longer previous
// text would leave behind.
func (l *Line) Draw(s string) {
	pad := max(l.lastLen-len(s), 0)
	fmt.Fprintf(l.w, "\r%s%s", s, strings.Repeat(" ", pad))
	l.lastLen = len(s)
}

// End ends the line, if anything was drawn, so that later output starts on
// a line of its own.
func (l *Line) End() {
	if l.lastLen > 0 {
		fmt.Fprintln(l.w)
		l.lastLen = 0
	}
}

// Bar renders done out of total as width cells, e.g. "[######......]".
// Negative progress shows an empty bar and overshoot a full one.
func Bar(done, total, width int) string {
	filled := 0
	if total > 0 {
		filled = min(width*max(done, 0)/total, width)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
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

// Counter is a bar over a known number of units (jobs, say), safe to
// advance from several goroutines at once. It redraws at most every
// 100 ms, so that advancing it per unit costs next to nothing.
type Counter struct {
	mu    sync.Mutex
	line  *Line
	label string
	unit  string
	total int
	done  int
	start time.Time
	drawn time.Time
}

// counterWidth is the number of cells in a Counter's bar.
const counterWidth = 30

// NewCounter starts a counter of total units on w.
func NewCounter(w io.Writer, label, unit string, total int) *Counter {
	return &Counter{line: NewLine(w), label: label, unit: unit, total: max(total, 1), start: time.Now()}
}

// Add advances the counter by n units.
func (c *Counter) Add(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done += n
	if now := time.Now(); now.Sub(c.drawn) >= 100*time.Millisecond || c.done >= c.total {
		c.drawn = now
		c.draw(now)
	}
}

// Finish draws the final state and ends the line.
func (c *Counter) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draw(time.Now())
	c.line.End()
}

func (c *Counter) draw(now time.Time) {
	frac := min(float64(c.done)/float64(c.total), 1)
	rate := float64(c.done) / max(now.Sub(c.start).Seconds(), 1e-9)
	c.line.Draw(fmt.Sprintf("%s %s %3.0f%% %d/%d %s, %.0f %s/s ", c.label, Bar(c.done, c.total, counterWidth),
		100*frac, c.done, c.total, c.unit, rate, c.unit))
}
