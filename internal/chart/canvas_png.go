package chart

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"unicode"
)

// pngCanvas rasterises a chart with the standard library: lines with a
// square pen, filled discs, and the bitmap font of font.go scaled by whole
// pixels.
type pngCanvas struct{ img *image.RGBA }

var _ canvas = (*pngCanvas)(nil)

func newPNGCanvas(w, h int) *pngCanvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	return &pngCanvas{img: img}
}

// pen paints a square of side width centred at (x, y).
func (p *pngCanvas) pen(x, y float64, width int, col color.RGBA) {
	x0, y0 := int(math.Round(x))-width/2, int(math.Round(y))-width/2
	draw.Draw(p.img, image.Rect(x0, y0, x0+width, y0+width), image.NewUniform(col), image.Point{}, draw.Src)
}

// line steps along the line one pixel at a time; dashes are 6 pixels on,
// 4 off.
func (p *pngCanvas) line(x0, y0, x1, y1, width float64, col color.RGBA, dashed bool) {
	n := int(math.Ceil(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))))
	w := max(int(math.Round(width)), 1)
	for i := 0; i <= n; i++ {
		if dashed && i%10 >= 6 {
			continue
		}
		t := 0.0
		if n > 0 {
			t = float64(i) / float64(n)
		}
		p.pen(x0+(x1-x0)*t, y0+(y1-y0)*t, w, col)
	}
}

func (p *pngCanvas) dot(cx, cy, r float64, col color.RGBA) {
	for y := int(cy - r); y <= int(cy+r)+1; y++ {
		for x := int(cx - r); x <= int(cx+r)+1; x++ {
			if dx, dy := float64(x)-cx, float64(y)-cy; dx*dx+dy*dy <= r*r {
				p.img.SetRGBA(x, y, col)
			}
		}
	}
}

func (p *pngCanvas) text(x, y float64, s string, size float64, col color.RGBA, align textAlign, vertical bool) {
	scale := max(int(math.Round(size/glyphHeight)), 1)
	runes := []rune(s)
	width := len(runes)*(glyphWidth+1)*scale - scale
	if vertical {
		// Reads bottom to top, centred on (x, y): glyph column c of rune i
		// lands on row y0 - ..., glyph row r on column x0 + r.
		x0 := int(math.Round(x)) - glyphHeight*scale/2
		y0 := int(math.Round(y)) + width/2
		for i, r := range runes {
			g := glyph(r)
			for gr := range glyphHeight {
				for gc := range glyphWidth {
					if g[gr][gc] == '#' {
						px := x0 + gr*scale
						py := y0 - (i*(glyphWidth+1)+gc+1)*scale
						draw.Draw(p.img, image.Rect(px, py, px+scale, py+scale), image.NewUniform(col), image.Point{}, draw.Src)
					}
				}
			}
		}
		return
	}
	x0 := int(math.Round(x))
	switch align {
	case alignCentre:
		x0 -= width / 2
	case alignRight:
		x0 -= width
	}
	y0 := int(math.Round(y))
	for i, r := range runes {
		g := glyph(r)
		for gr := range glyphHeight {
			for gc := range glyphWidth {
				if g[gr][gc] == '#' {
					px := x0 + (i*(glyphWidth+1)+gc)*scale
					py := y0 + gr*scale
					draw.Draw(p.img, image.Rect(px, py, px+scale, py+scale), image.NewUniform(col), image.Point{}, draw.Src)
				}
			}
		}
	}
}

func (p *pngCanvas) writeTo(w io.Writer) error { return png.Encode(w, p.img) }

// glyph is r's bitmap: capitals stand in for lower case, and a question
// mark for anything the font lacks.
func glyph(r rune) [glyphHeight]string {
	r = unicode.ToUpper(r)
	switch r {
	case '–', '—', '−':
		r = '-'
	case '…':
		r = '.'
	}
	if g, ok := font[r]; ok {
		return g
	}
	return font['?']
}
