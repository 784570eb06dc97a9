package chart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
)

// svgCanvas collects SVG elements.
type svgCanvas struct {
	w, h int
	body bytes.Buffer
}

var _ canvas = (*svgCanvas)(nil)

func newSVGCanvas(w, h int) *svgCanvas { return &svgCanvas{w: w, h: h} }

func rgb(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func (s *svgCanvas) line(x0, y0, x1, y1, width float64, col color.RGBA, dashed bool) {
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(&s.body, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%g"%s/>`+"\n",
		x0, y0, x1, y1, rgb(col), width, dash)
}

func (s *svgCanvas) dot(x, y, r float64, col color.RGBA) {
	fmt.Fprintf(&s.body, `<circle cx="%.1f" cy="%.1f" r="%g" fill="%s"/>`+"\n", x, y, r, rgb(col))
}

func (s *svgCanvas) text(x, y float64, str string, size float64, col color.RGBA, align textAlign, vertical bool) {
	anchor := [...]string{"start", "middle", "end"}[align]
	// Font sizes are em heights; a cap height is about 0.7 em, so size/0.7
	// makes capitals as tall as the PNG's glyphs.
	em := size / 0.7
	var esc bytes.Buffer
	_ = xml.EscapeText(&esc, []byte(str))
	if vertical {
		fmt.Fprintf(&s.body, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" dominant-baseline="middle" font-family="sans-serif" font-size="%.1f" fill="%s">%s</text>`+"\n",
			x, y, em, rgb(col), esc.String())
		return
	}
	fmt.Fprintf(&s.body, `<text x="%.1f" y="%.1f" text-anchor="%s" font-family="sans-serif" font-size="%.1f" fill="%s">%s</text>`+"\n",
		x, y+size, anchor, em, rgb(col), esc.String())
}

func (s *svgCanvas) writeTo(w io.Writer) error {
	_, err := fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">
<rect width="100%%" height="100%%" fill="#ffffff"/>
%s</svg>
`, s.w, s.h, s.w, s.h, s.body.String())
	return err
}
