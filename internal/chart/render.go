package chart

import (
	"errors"
	"fmt"
	"io"

	"github.com/lachesis-sched/lachesis/profile"
)

// ErrUnknownFormat is returned by Render for a format it does not draw.
var ErrUnknownFormat = errors.New("profiler: unknown render format")

// Render writes r in format: "text", a table of the sweep, the best case
// and the sensitivity matrix (for `show`); "svg" or "png", a chart of
// throughput against CPUs with the tolerance band and the best case.
// Charts are drawn with the standard library alone.
func Render(w io.Writer, r profile.Record, format string) error {
	switch format {
	case "text":
		return profile.WriteText(w, r)
	case "svg":
		c := newSVGCanvas(chartWidth, chartHeight)
		drawChart(c, r)
		return c.writeTo(w)
	case "png":
		c := newPNGCanvas(chartWidth, chartHeight)
		drawChart(c, r)
		return c.writeTo(w)
	default:
		return fmt.Errorf("%w %q (text, svg, png)", ErrUnknownFormat, format)
	}
}
