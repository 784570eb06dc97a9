package chart

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lachesis-sched/lachesis/profile"
)

// ErrUnknownFormat is returned by Render for a format it does not draw.
var ErrUnknownFormat = errors.New("chart: unknown render format")

// Size of the profile chart in pixels.
const chartWidth, chartHeight = 900, 600

var (
	sweepColour = palette[0] // blue
	bandColour  = palette[1] // vermillion
	bestColour  = palette[2] // bluish green
	// bandFill is bandColour washed out, opaque so SVG viewers without
	// opacity support show the same chart.
	bandFill = color.RGBA{250, 226, 210, 255}
)

// Render writes r in format: "text", a table of the sweep, the best case
// and the sensitivity matrix (for `show`); "svg" or "png", a chart of
// throughput against CPUs with the tolerance band and the best case.
func Render(w io.Writer, r profile.Record, format string) error {
	switch format {
	case "text":
		return profile.WriteText(w, r)
	case "svg", "png":
		p, footer, err := profilePlot(r)
		if err != nil {
			return err
		}
		return encode(w, chartWidth, chartHeight, format, func(c draw.Canvas) {
			layOut(c, p, footer)
		})
	default:
		return fmt.Errorf("%w %q (text, svg, png)", ErrUnknownFormat, format)
	}
}

// profilePlot is throughput against CPUs: the measured points joined, the
// band within tolerance of the best throughput, and the best case; and the
// lines that go under it (the best case per GPU, and a warning when the
// node may have too few cores to find it).
func profilePlot(r profile.Record) (*plot.Plot, []footerLine, error) {
	p := newPlot(
		fmt.Sprintf("%s: throughput against CPUs\nnode %s, %d GPU(s), signal %s, %s",
			r.Model, r.Node, r.GPUs, r.Signal, r.Started.Format("2006-01-02 15:04")),
		"CPUs", profile.ThroughputUnit(r.Signal))

	// A measurement that is not a number cannot be drawn (and the
	// library refuses it); the text format still shows it.
	var sweep plotter.XYs
	best, maxCPUs := 0.0, 1
	for _, m := range r.CPUSweep {
		maxCPUs = max(maxCPUs, m.CPUs)
		if math.IsNaN(m.Throughput) || math.IsInf(m.Throughput, 0) {
			continue
		}
		sweep = append(sweep, plotter.XY{X: float64(m.CPUs), Y: m.Throughput})
		best = max(best, m.Throughput)
	}
	yTicks := niceTicks(best * 1.15)
	ymax := yTicks[len(yTicks)-1]

	p.Add(grid())
	if best > 0 {
		floor := (1 - r.Tolerance) * best
		band, err := plotter.NewPolygon(plotter.XYs{{X: 0, Y: floor}, {X: float64(maxCPUs), Y: floor},
			{X: float64(maxCPUs), Y: best}, {X: 0, Y: best}})
		if err != nil {
			return nil, nil, err
		}
		band.Color = bandFill
		band.LineStyle.Width = 0
		edge, err := plotter.NewLine(plotter.XYs{{X: 0, Y: floor}, {X: float64(maxCPUs), Y: floor}})
		if err != nil {
			return nil, nil, err
		}
		edge.Color, edge.Width = bandColour, vg.Points(1.5)
		edge.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		p.Add(band, edge)
		p.Legend.Add(fmt.Sprintf("within %.0f%% of the best", 100*r.Tolerance), band, edge)
	}
	if bc := r.BestCPUs(); bc > 0 && len(sweep) > 0 {
		at, err := plotter.NewLine(plotter.XYs{{X: float64(bc), Y: 0}, {X: float64(bc), Y: ymax}})
		if err != nil {
			return nil, nil, err
		}
		at.Color, at.Width = bestColour, vg.Points(2)
		at.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		p.Add(at)
		p.Legend.Add("best case: "+profile.NCPUs(bc), at)
	}
	if len(sweep) > 0 {
		line, points, err := plotter.NewLinePoints(sweep)
		if err != nil {
			return nil, nil, err
		}
		line.Color, line.Width = sweepColour, vg.Points(2.25)
		points.Color, points.Shape, points.Radius = sweepColour, draw.CircleGlyph{}, vg.Points(4)
		p.Add(line, points)
		p.Legend.Add("measured", line, points)
	}

	p.X.Min, p.X.Max = 0, float64(maxCPUs)
	p.Y.Min, p.Y.Max = 0, ymax
	p.X.Tick.Marker = plot.TickerFunc(func(_, _ float64) []plot.Tick {
		var ticks []plot.Tick
		for _, t := range cpuTicks(maxCPUs) {
			ticks = append(ticks, plot.Tick{Value: float64(t), Label: fmt.Sprint(t)})
		}
		return ticks
	})
	p.Y.Tick.Marker = plot.TickerFunc(func(_, _ float64) []plot.Tick {
		var ticks []plot.Tick
		for _, t := range yTicks {
			ticks = append(ticks, plot.Tick{Value: t, Label: strconv.FormatFloat(t, 'g', 12, 64)})
		}
		return ticks
	})
	footer := []footerLine{{fmt.Sprintf("best case per GPU: %s, %.2f GB (within %.0f%% of the best)",
		profile.NCPUs(r.Best.CPUsPerGPU), r.Best.MemGBPerGPU, 100*r.Tolerance), inkColour}}
	if r.MayWantMoreCPUs() {
		footer = append(footer, footerLine{fmt.Sprintf("needs ≥ %d of %d cores: may want more CPUs than this node has",
			r.BestCPUs(), r.MaxSweptCPUs()), bandColour})
	}
	return p, footer, nil
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

// niceTicks are 0 and about five round steps reaching at least top: the
// library's default labels as few as two ticks on a short range.
func niceTicks(top float64) []float64 {
	if !(top > 0) || math.IsInf(top, 0) {
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
	for i := 0; ; i++ {
		v := float64(i) * step
		ticks = append(ticks, v)
		if v >= top-1e-9*step {
			return ticks
		}
	}
}
