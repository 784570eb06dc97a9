package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/progressbar"
	"github.com/lachesis-sched/lachesis/profiler"
)

// barWidth is the number of cells in a profiling run's bar.
const barWidth = 24

// profileProgress shows a profiling run's progress: on a terminal one line
// redrawn in place with a bar over the sweep's points, the last
// measurement, the time elapsed and an ETA; elsewhere (a log, a pipe) one
// plain line per message.
type profileProgress struct {
	w       io.Writer
	line    *progressbar.Line // nil unless w is a terminal
	lastMsg string
}

func newProfileProgress(w io.Writer, terminal bool) *profileProgress {
	pp := &profileProgress{w: w}
	if terminal {
		pp.line = progressbar.NewLine(w)
	}
	return pp
}

// update shows p; its signature fits localapi.Profile.
func (pp *profileProgress) update(p profiler.Progress) {
	if pp.line != nil {
		pp.line.Draw(progressLine(p))
		return
	}
	if p.Message != "" && p.Message != pp.lastMsg {
		fmt.Fprintf(pp.w, "%s  [%d/%d points, elapsed %s, ETA %s]\n", p.Message, p.Point, p.Points,
			progressbar.Duration(p.Elapsed), progressbar.Duration(p.ETA))
		pp.lastMsg = p.Message
	}
}

// done ends the bar's line on a terminal.
func (pp *profileProgress) done() {
	if pp.line != nil {
		pp.line.End()
	}
}

// progressLine renders p as one line: bar, points, last reading, times,
// message.
func progressLine(p profiler.Progress) string {
	var sb strings.Builder
	sb.WriteString(progressbar.Bar(p.Point, p.Points, barWidth))
	fmt.Fprintf(&sb, " %d/%d", p.Point, p.Points)
	if p.CPUs > 0 {
		fmt.Fprintf(&sb, "  %d CPUs: %.4g/s", p.CPUs, p.Throughput)
	}
	fmt.Fprintf(&sb, "  %s elapsed, ETA %s", progressbar.Duration(p.Elapsed), progressbar.Duration(p.ETA))
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
