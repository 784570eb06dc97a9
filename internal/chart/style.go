package chart

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// dpi turns the pixel sizes charts are specified in into the library's
// points: a PNG of W×H pixels is exactly that, and an SVG of the same chart
// shows at the same size in a browser (96 CSS pixels an inch).
const dpi = 96

func px(n float64) vg.Length { return vg.Length(n) * vg.Inch / dpi }

// palette is colour-blind-friendly (Okabe–Ito) and then some; series take
// its colours in order.
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
	inkColour  = color.RGBA{30, 30, 30, 255}
	gridColour = color.RGBA{215, 215, 215, 255}
)

// sans is the face of all chart text: the library's default is a serif,
// which reads worse at tick-label sizes.
func sans(size vg.Length) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
}

// newPlot is a plot with sans-serif text at legible sizes, a light dashed
// grid under the data, and the given title and axis labels.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font = sans(15)
	p.Title.TextStyle.Color = inkColour
	p.Title.Padding = px(12)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = sans(13)
		a.Label.TextStyle.Color = inkColour
		a.Label.Padding = px(6)
		a.Tick.Label.Font = sans(11)
		a.Tick.Label.Color = inkColour
		a.Color = inkColour
		a.LineStyle.Width = vg.Points(1)
		a.Tick.LineStyle.Color = inkColour
		a.Tick.LineStyle.Width = vg.Points(1)
	}
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.Legend.TextStyle.Font = sans(12)
	p.Legend.TextStyle.Color = inkColour
	p.Legend.ThumbnailWidth = px(36)
	p.Legend.Padding = px(4)
	return p
}

// grid is dashed and light so data drawn over it stands out.
func grid() *plotter.Grid {
	g := plotter.NewGrid()
	for _, l := range []*draw.LineStyle{&g.Vertical, &g.Horizontal} {
		l.Color = gridColour
		l.Width = vg.Points(0.75)
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
	}
	return g
}

// encode draws onto a canvas of w×h pixels in format ("svg" or "png")
// and writes it out.
func encode(out io.Writer, w, h float64, format string, drawOn func(draw.Canvas)) error {
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch format {
	case "svg":
		// Fonts are named, not embedded: embedding the sans face turns a
		// 6 KB chart into half a megabyte.
		c = vgsvg.New(px(w), px(h))
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(px(w), px(h)), vgimg.UseDPI(dpi))}
	default:
		return fmt.Errorf("%w %q (svg, png)", ErrUnknownFormat, format)
	}
	dc := draw.New(c)
	// The plot paints only its own area; SVG would leave the margins
	// transparent, dark in a dark-themed viewer.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawOn(dc)
	_, err := c.WriteTo(out)
	return err
}

// footerLine is a line of text under a chart.
type footerLine struct {
	text   string
	colour color.Color
}

// layOut draws p with its legend in a column on the right, outside the
// data, and footer lines centred under it. Outside, the legend hides no
// data; its text runs to the right, so a viewer substituting a wider font
// for the SVG's pushes it into the margin, not into the line samples.
func layOut(c draw.Canvas, p *plot.Plot, footer []footerLine) {
	pad := px(16)
	c = draw.Crop(c, pad, -pad, pad, -pad)

	lineH := px(24)
	sty := text.Style{Font: sans(13), XAlign: draw.XCenter, YAlign: draw.YBottom, Handler: p.TextHandler}
	for i, l := range footer {
		sty.Color = l.colour
		y := c.Min.Y + lineH*vg.Length(len(footer)-1-i)
		c.FillText(sty, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: y}, l.text)
	}

	legend := p.Legend
	q := *p
	q.Legend = plot.NewLegend()
	r := legend.Rectangle(c)
	legendW := (r.Max.X-r.Min.X)*1.15 + pad // room for a wider stand-in font
	area := draw.Crop(c, 0, -legendW, lineH*vg.Length(len(footer)), 0)
	q.Draw(area)

	// Top-aligned with the data area, left-aligned in the column.
	data := q.DataCanvas(area)
	column := draw.Crop(c, data.Max.X-c.Min.X+pad, 0, 0, 0)
	column.Max.Y = data.Max.Y
	legend.Top, legend.Left = true, true
	legend.Draw(column)
}
