package plot

import (
	"image"
	"image/color"
	"image/draw"
	"unicode"
)

// canvas is an RGBA image with the few drawing operations a chart needs.
type canvas struct {
	img *image.RGBA
}

func newCanvas(w, h int, bg color.Color) *canvas {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{bg}, image.Point{}, draw.Src)
	return &canvas{img: img}
}

// dot paints a square pen of side size centred at (x, y).
func (c *canvas) dot(x, y, size int, col color.Color) {
	for dy := 0; dy < size; dy++ {
		for dx := 0; dx < size; dx++ {
			px, py := x+dx-size/2, y+dy-size/2
			if image.Pt(px, py).In(c.img.Rect) {
				c.img.Set(px, py, col)
			}
		}
	}
}

// line draws a straight line with Bresenham's algorithm and a square pen.
func (c *canvas) line(x0, y0, x1, y1, width int, col color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	err := dx + dy
	for {
		c.dot(x0, y0, width, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
			y0 += sy
		}
	}
}

// dashed draws a horizontal or vertical dotted line (grid lines).
func (c *canvas) dashed(x0, y0, x1, y1 int, col color.Color) {
	for i := 0; ; i++ {
		x := x0 + sign(x1-x0)*i
		y := y0 + sign(y1-y0)*i
		if i%4 < 2 {
			c.img.Set(x, y, col)
		}
		if x == x1 && y == y1 {
			return
		}
	}
}

func (c *canvas) rect(r image.Rectangle, col color.Color) {
	draw.Draw(c.img, r, &image.Uniform{col}, image.Point{}, draw.Src)
}

// textWidth is the width in pixels of s at the given scale.
func textWidth(s string, scale int) int {
	n := len([]rune(s))
	if n == 0 {
		return 0
	}
	return (n*(glyphW+1) - 1) * scale
}

// text draws s with its top-left corner at (x, y).
func (c *canvas) text(x, y int, s string, scale int, col color.Color) {
	for _, r := range s {
		g, top := glyph(r), y
		if descenders[r] {
			top += 2 * scale
		}
		for row := 0; row < glyphH; row++ {
			for colIdx := 0; colIdx < glyphW; colIdx++ {
				if g[row][colIdx] == '#' {
					c.rect(image.Rect(x+colIdx*scale, top+row*scale, x+(colIdx+1)*scale, top+(row+1)*scale), col)
				}
			}
		}
		x += (glyphW + 1) * scale
	}
}

// textVertical draws s bottom-to-top with its bottom-left corner at (x, y),
// for a y-axis label.
func (c *canvas) textVertical(x, y int, s string, scale int, col color.Color) {
	for _, r := range s {
		g, left := glyph(r), x
		if descenders[r] {
			left += 2 * scale
		}
		for row := 0; row < glyphH; row++ {
			for colIdx := 0; colIdx < glyphW; colIdx++ {
				if g[row][colIdx] == '#' {
					px, py := left+row*scale, y-(colIdx+1)*scale
					c.rect(image.Rect(px, py, px+scale, py+scale), col)
				}
			}
		}
		y -= (glyphW + 1) * scale
	}
}

// glyph is r's bitmap, its capital's when r has none, else '?'.
func glyph(r rune) [7]string {
	if g, ok := glyphs[r]; ok {
		return g
	}
	if g, ok := glyphs[unicode.ToUpper(r)]; ok {
		return g
	}
	return glyphs['?']
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
