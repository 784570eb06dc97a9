// Package plot draws the simulator's charts as PNG with the standard library
// alone: axes, grid, a 5×7 bitmap font and polylines, nothing more.
package plot

import (
	"errors"
	"image/color"
	"image/png"
	"io"
	"math"
	"slices"
	"sort"
)

// ErrNoData is returned for a chart without any finite positive value.
var ErrNoData = errors.New("plot: no data to draw")

// Series is one line of a chart.
type Series struct {
	Label  string
	Values []float64
}

// CDF describes a chart of empirical CDFs on a logarithmic x axis, the
// usual way to show job completion times that span seconds to weeks.
type CDF struct {
	Title  string
	XLabel string
	Series []Series
	// Width and Height in pixels; 1000×640 when zero.
	Width, Height int
}

// palette is colour-blind-friendly (Okabe–Ito) and then some.
var palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // bluish green
	{204, 121, 167, 255}, // reddish purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky blue
	{0, 0, 0, 255},       // black
	{150, 150, 0, 255},   // olive
	{120, 60, 160, 255},  // purple
	{120, 120, 120, 255}, // grey
}

var (
	white = color.RGBA{255, 255, 255, 255}
	ink   = color.RGBA{30, 30, 30, 255}
	grid  = color.RGBA{200, 200, 200, 255}
)

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
// drawn at the axis's left edge.
func (c CDF) WritePNG(w io.Writer) error {
	width, height := c.Width, c.Height
	if width == 0 {
		width, height = 1000, 640
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	sorted := make([][]float64, len(c.Series))
	for i, s := range c.Series {
		sorted[i] = slices.Clone(s.Values)
		slices.Sort(sorted[i])
		for _, v := range sorted[i] {
			if v > 0 && !math.IsInf(v, 0) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return ErrNoData
	}
	// Whole decades around the data, so the chart starts and ends on ticks.
	xmin := math.Pow(10, math.Floor(math.Log10(lo)))
	xmax := math.Pow(10, math.Ceil(math.Log10(hi)))
	if xmax <= xmin {
		xmax = xmin * 10
	}

	const scale = 2
	legend := 0
	for _, s := range c.Series {
		legend = max(legend, textWidth(s.Label, scale))
	}
	left, right, top, bottom := 90, legend+90, 60, 80
	cv := newCanvas(width, height, white)
	pw, ph := width-left-right, height-top-bottom
	x := func(v float64) int {
		if v <= xmin {
			return left
		}
		return left + int(math.Round(float64(pw)*math.Log(v/xmin)/math.Log(xmax/xmin)))
	}
	y := func(f float64) int { return top + ph - int(math.Round(float64(ph)*f)) }

	// Grid and tick labels; a tick whose label would touch the previous
	// one is left out, so dense charts keep the round numbers.
	lastEnd := math.MinInt
	for _, t := range timeTicks {
		if t.sec < xmin || t.sec > xmax {
			continue
		}
		px := x(t.sec)
		w := textWidth(t.label, scale)
		if px-w/2 < lastEnd+4*scale {
			continue
		}
		lastEnd = px + w/2
		cv.dashed(px, top, px, top+ph, grid)
		cv.line(px, top+ph, px, top+ph+6, 1, ink)
		cv.text(px-w/2, top+ph+12, t.label, scale, ink)
	}
	for i := 0; i <= 10; i += 2 {
		f := float64(i) / 10
		py := y(f)
		cv.dashed(left, py, left+pw, py, grid)
		cv.line(left-6, py, left, py, 1, ink)
		label := []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}[i/2]
		cv.text(left-12-textWidth(label, scale), py-glyphH*scale/2, label, scale, ink)
	}
	cv.line(left, top, left, top+ph, 2, ink)
	cv.line(left, top+ph, left+pw, top+ph, 2, ink)

	// One polyline per series: at every pixel column the fraction of values
	// at or below the column's x, so the line is the empirical CDF sampled
	// at screen resolution.
	for i, vals := range sorted {
		col := palette[i%len(palette)]
		n := float64(len(vals))
		prevX, prevY := -1, -1
		for px := left; px <= left+pw; px++ {
			v := xmin * math.Pow(xmax/xmin, float64(px-left)/float64(pw))
			k := sort.SearchFloat64s(vals, math.Nextafter(v, math.Inf(1)))
			py := y(float64(k) / max(n, 1))
			if prevX >= 0 {
				cv.line(prevX, prevY, px, py, 3, col)
			}
			prevX, prevY = px, py
		}
	}

	// Title, axis labels, legend.
	cv.text(left+pw/2-textWidth(c.Title, scale)/2, 20, c.Title, scale, ink)
	cv.text(left+pw/2-textWidth(c.XLabel, scale)/2, height-34, c.XLabel, scale, ink)
	cv.textVertical(24, top+ph/2+textWidth("fraction of jobs", scale)/2, "fraction of jobs", scale, ink)
	lx, ly := left+pw+24, top+10
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		cv.line(lx, ly+glyphH*scale/2, lx+28, ly+glyphH*scale/2, 4, col)
		cv.text(lx+38, ly, s.Label, scale, ink)
		ly += (glyphH + 6) * scale
	}
	return png.Encode(w, cv.img)
}
