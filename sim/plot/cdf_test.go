package plot

import (
	"bytes"
	"errors"
	"image/png"
	"testing"
)

func TestWritePNG_DrawsEachSeriesInItsOwnColour(t *testing.T) {
	var buf bytes.Buffer
	c := CDF{Title: "t", XLabel: "x", Series: []Series{
		{Label: "a", Values: []float64{1, 10, 100}},
		{Label: "b", Values: []float64{5, 50, 500}},
	}}
	if err := c.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	colours := map[[3]uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	// The first two palette colours (blue, vermillion) must be on the chart.
	if !colours[[3]uint32{0, 114, 178}] || !colours[[3]uint32{213, 94, 0}] {
		t.Fatal("series colours missing from the chart")
	}
	if err := (CDF{Series: []Series{{Label: "empty"}}}).WritePNG(&buf); !errors.Is(err, ErrNoData) {
		t.Fatalf("empty chart: err = %v, want ErrNoData", err)
	}
}

func TestTextWidth(t *testing.T) {
	if got := textWidth("ab", 2); got != (2*6-1)*2 {
		t.Fatalf("textWidth = %d", got)
	}
	if textWidth("", 3) != 0 {
		t.Fatal("empty text has width")
	}
}

func TestEveryGlyphIsFiveBySeven(t *testing.T) {
	for r, g := range glyphs {
		for _, row := range g {
			if len(row) != glyphW {
				t.Fatalf("glyph %q has a row of %d columns", r, len(row))
			}
		}
	}
}
