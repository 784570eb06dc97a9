package chart

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"github.com/lachesis-sched/lachesis/profile"
)

// canvas is what a chart is drawn on: the SVG and PNG backends.
type canvas interface {
	// line strokes from (x0, y0) to (x1, y1), dashed or solid.
	line(x0, y0, x1, y1, width float64, col color.RGBA, dashed bool)
	// dot fills a disc of radius r centred at (x, y).
	dot(x, y, r float64, col color.RGBA)
	// text writes s with its top at y, horizontally placed by align
	// relative to x; size is the glyph height in pixels. vertical text
	// reads bottom to top, centred on (x, y).
	text(x, y float64, s string, size float64, col color.RGBA, align textAlign, vertical bool)
}

type textAlign int

const (
	alignLeft textAlign = iota
	alignCentre
	alignRight
)

const (
	chartWidth, chartHeight = 900, 600
	// textSize is the glyph height of ordinary chart text (the PNG font is
	// 7 pixels high at scale 1, so sizes are multiples of 7).
	textSize  = 14
	titleSize = 21
)

var (
	inkColour   = color.RGBA{30, 30, 30, 255}
	gridColour  = color.RGBA{215, 215, 215, 255}
	lineColour  = color.RGBA{0, 114, 178, 255} // blue
	bandColour  = color.RGBA{213, 94, 0, 255}  // vermillion
	bestColour  = color.RGBA{0, 158, 115, 255} // bluish green
	mutedColour = color.RGBA{110, 110, 110, 255}
)

// drawChart draws throughput against CPUs: the measured points joined, the
// band within tolerance of the best throughput, and the best case.
func drawChart(c canvas, r profile.Record) {
	const left, right, top, bottom = 100.0, 40.0, 90.0, 140.0
	pw, ph := chartWidth-left-right, chartHeight-top-bottom

	c.text(chartWidth/2, 18, fmt.Sprintf("%s: throughput against CPUs", r.Model), titleSize, inkColour, alignCentre, false)
	c.text(chartWidth/2, 50, fmt.Sprintf("node %s, %d GPU(s), signal %s, %s", r.Node, r.GPUs, r.Signal,
		r.Started.Format("2006-01-02 15:04")), textSize, mutedColour, alignCentre, false)

	best, maxCPUs := 0.0, 1
	for _, m := range r.CPUSweep {
		best = max(best, m.Throughput)
		maxCPUs = max(maxCPUs, m.CPUs)
	}
	yTicks := niceTicks(best * 1.15)
	ymax := yTicks[len(yTicks)-1]
	if ymax <= 0 {
		ymax = 1
	}
	x := func(cpus float64) float64 { return left + pw*cpus/float64(maxCPUs) }
	y := func(v float64) float64 { return top + ph - ph*v/ymax }

	// Grid, ticks, axes.
	for _, t := range yTicks {
		c.line(left, y(t), left+pw, y(t), 1, gridColour, true)
		c.text(left-10, y(t)-textSize/2, formatTick(t), textSize, inkColour, alignRight, false)
	}
	for _, t := range cpuTicks(maxCPUs) {
		c.line(x(float64(t)), top+ph, x(float64(t)), top+ph+6, 2, inkColour, false)
		c.text(x(float64(t)), top+ph+12, fmt.Sprint(t), textSize, inkColour, alignCentre, false)
	}
	c.line(left, top, left, top+ph, 2, inkColour, false)
	c.line(left, top+ph, left+pw, top+ph, 2, inkColour, false)
	c.text(left+pw/2, top+ph+38, "CPUs", textSize, inkColour, alignCentre, false)
	c.text(30, top+ph/2, profile.ThroughputUnit(r.Signal), textSize, inkColour, alignCentre, true)

	// Tolerance band and best case.
	if best > 0 {
		floor := (1 - r.Tolerance) * best
		c.line(left, y(floor), left+pw, y(floor), 2, bandColour, true)
		c.text(left+8, y(floor)+6, fmt.Sprintf("best - %.0f%%", 100*r.Tolerance), textSize, bandColour, alignLeft, false)
	}
	if bc := r.BestCPUs(); bc > 0 && len(r.CPUSweep) > 0 {
		c.line(x(float64(bc)), top, x(float64(bc)), top+ph, 2, bestColour, true)
		label := "best case: " + profile.NCPUs(bc)
		align, dx := alignRight, -8.0
		if x(float64(bc)) < left+pw/2 {
			align, dx = alignLeft, 8
		}
		c.text(x(float64(bc))+dx, top+8, label, textSize, bestColour, align, false)
	}

	// The sweep.
	for i := 1; i < len(r.CPUSweep); i++ {
		a, b := r.CPUSweep[i-1], r.CPUSweep[i]
		c.line(x(float64(a.CPUs)), y(a.Throughput), x(float64(b.CPUs)), y(b.Throughput), 3, lineColour, false)
	}
	for _, m := range r.CPUSweep {
		c.dot(x(float64(m.CPUs)), y(m.Throughput), 6, lineColour)
	}

	c.text(chartWidth/2, chartHeight-62, fmt.Sprintf("best case per GPU: %s, %.2f GB (within %.0f%% of the best)",
		profile.NCPUs(r.Best.CPUsPerGPU), r.Best.MemGBPerGPU, 100*r.Tolerance), textSize, inkColour, alignCentre, false)
	if r.MayWantMoreCPUs() {
		c.text(chartWidth/2, chartHeight-36, fmt.Sprintf("needs >= %d of %d cores: may want more CPUs than this node has",
			r.BestCPUs(), r.MaxSweptCPUs()), textSize, bandColour, alignCentre, false)
	}
}

// niceTicks are 0 and about five round steps reaching at least top.
func niceTicks(top float64) []float64 {
	if !(top > 0) || !isFinite(top) {
		return []float64{0, 1}
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag * 10
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for v := 0.0; ; v += step {
		ticks = append(ticks, v)
		if v >= top-1e-9*step {
			return ticks
		}
	}
}

// cpuTicks are every count up to 16 CPUs, then round steps.
func cpuTicks(maxCPUs int) []int {
	step := 1
	for _, s := range []int{1, 2, 4, 8, 16, 32, 64} {
		step = s
		if maxCPUs/s <= 16 {
			break
		}
	}
	var out []int
	for t := 0; t <= maxCPUs; t += step {
		out = append(out, t)
	}
	return out
}

func formatTick(v float64) string {
	s := fmt.Sprintf("%.4g", v)
	if strings.Contains(s, "e") {
		s = fmt.Sprintf("%.0f", v)
	}
	return s
}
