package sim

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Bar is a progress bar over a known number of jobs, safe to advance from
// several simulations at once. It redraws at most every 100 ms.
type Bar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	total int
	done  int
	start time.Time
	drawn time.Time
}

// NewBar starts a bar for total jobs.
func NewBar(w io.Writer, label string, total int) *Bar {
	return &Bar{w: w, label: label, total: max(total, 1), start: time.Now()}
}

// Add advances the bar by n jobs. Its signature fits Config.Progress.
func (b *Bar) Add(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if now := time.Now(); now.Sub(b.drawn) >= 100*time.Millisecond || b.done >= b.total {
		b.drawn = now
		b.draw(now)
	}
}

// Finish draws the final state and ends the line.
func (b *Bar) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.draw(time.Now())
	fmt.Fprintln(b.w)
}

func (b *Bar) draw(now time.Time) {
	const width = 30
	frac := min(float64(b.done)/float64(b.total), 1)
	full := int(frac * width)
	elapsed := now.Sub(b.start).Seconds()
	rate := float64(b.done) / max(elapsed, 1e-9)
	fmt.Fprintf(b.w, "\r%s [%s%s] %3.0f%% %d/%d jobs, %.0f jobs/s ", b.label,
		strings.Repeat("#", full), strings.Repeat(".", width-full), 100*frac, b.done, b.total, rate)
}
