package chart

import (
	"errors"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrNoData is returned for a CDF without any finite positive value.
var ErrNoData = errors.New("chart: no data to draw")

// Series is one line of a chart.
type Series struct {
	Label  string
	Values []float64
}

// CDF describes a chart of empirical CDFs of durations in seconds on a
// logarithmic x axis, the usual way to show job completion times that span
// seconds to weeks.
type CDF struct {
	Title  string
	XLabel string
	Series []Series
	// Width and Height in pixels; 1000×640 when zero.
	Width, Height int
}

// timeTicks are the x-axis ticks offered, in seconds, with their labels.
var timeTicks = []struct {
	sec   float64
	label string
}{
	{1, "1s"}, {10, "10s"}, {60, "1m"}, {600, "10m"}, {1800, "30m"}, {3600, "1h"},
	{3 * 3600, "3h"}, {6 * 3600, "6h"}, {12 * 3600, "12h"}, {86400, "1d"}, {3 * 86400, "3d"},
	{7 * 86400, "1w"}, {30 * 86400, "30d"}, {365 * 86400, "1y"},
}

// WritePNG renders the chart. Values ≤ 0 cannot sit on a log axis and are
// drawn at the axis's left edge; infinite and NaN values are not drawn but
// still count, so a series with some keeps below 1.
func (c CDF) WritePNG(w io.Writer) error {
	width, height := c.Width, c.Height
	if width == 0 || height == 0 {
		width, height = 1000, 640
	}
	p, err := c.plot(width)
	if err != nil {
		return err
	}
	return encode(w, float64(width), float64(height), "png", func(dc draw.Canvas) { layOut(dc, p, nil) })
}

func (c CDF) plot(width int) (*plot.Plot, error) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, v := range s.Values {
			if v > 0 && !math.IsInf(v, 0) { // NaN fails v > 0
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return nil, ErrNoData
	}
	// Whole decades around the data, so the axis starts and ends on round
	// numbers.
	xmin := math.Pow(10, math.Floor(math.Log10(lo)))
	xmax := math.Pow(10, math.Ceil(math.Log10(hi)))
	if xmax <= xmin {
		xmax = xmin * 10
	}

	p := newPlot(c.Title, c.XLabel, "fraction of jobs")
	p.Add(grid())
	for i, s := range c.Series {
		line, err := plotter.NewLine(cdfSteps(s.Values, xmin, xmax))
		if err != nil {
			return nil, err
		}
		line.StepStyle = plotter.PostStep
		line.Color, line.Width = palette[i%len(palette)], vg.Points(2.25)
		p.Add(line)
		p.Legend.Add(s.Label, line)
	}
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = xmin, xmax
	p.Y.Min, p.Y.Max = 0, 1
	// About 40 pixels per label, so neighbours never touch; the rest are
	// minor ticks.
	p.X.Tick.Marker = logTimeTicks(math.Log10(xmax/xmin) * 40 / float64(max(width-150, 100)))
	p.Y.Tick.Marker = plot.TickerFunc(func(_, _ float64) []plot.Tick {
		var ticks []plot.Tick
		for i, l := range []string{"0", "0.2", "0.4", "0.6", "0.8", "1"} {
			ticks = append(ticks, plot.Tick{Value: float64(i) / 5, Label: l})
		}
		return ticks
	})
	return p, nil
}

// cdfSteps are the corners of the empirical CDF of values as a post-step
// line from xmin (fraction 0) to xmax: one point per value, at the
// fraction of values at or below it.
func cdfSteps(values []float64, xmin, xmax float64) plotter.XYs {
	n := float64(max(len(values), 1))
	sorted := slices.DeleteFunc(slices.Clone(values), math.IsNaN)
	slices.Sort(sorted)
	pts := plotter.XYs{{X: xmin, Y: 0}}
	for i, v := range sorted {
		if math.IsInf(v, 0) {
			continue
		}
		pt := plotter.XY{X: max(v, xmin), Y: float64(i+1) / n}
		if last := &pts[len(pts)-1]; last.X == pt.X {
			last.Y = pt.Y // equal values make one step
			continue
		}
		pts = append(pts, pt)
	}
	return append(pts, plotter.XY{X: xmax, Y: pts[len(pts)-1].Y})
}

// logTimeTicks labels the round durations in range, leaving a label out
// when it would sit within minGap decades of the previous one (it stays
// as a minor tick).
func logTimeTicks(minGap float64) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		last := math.Inf(-1)
		for _, t := range timeTicks {
			if t.sec < lo || t.sec > hi {
				continue
			}
			tick := plot.Tick{Value: t.sec}
			if d := math.Log10(t.sec); d-last >= minGap {
				tick.Label, last = t.label, d
			}
			ticks = append(ticks, tick)
		}
		return ticks
	})
}
