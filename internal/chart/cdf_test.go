package chart

import (
	"bytes"
	"errors"
	"image/png"
	"io"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/plot/plotter"
)

func TestWritePNG_DrawsEachSeriesInItsOwnColour(t *testing.T) {
	var b bytes.Buffer
	c := CDF{Title: "t", XLabel: "x", Series: []Series{
		{Label: "a", Values: []float64{1, 10, 100}},
		{Label: "b", Values: []float64{5, 50, 500}},
		{Label: "c", Values: []float64{20, 2000, 20000}},
	}}
	if err := c.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	found := colours(t, &b)
	for i := range c.Series {
		if found[palette[i]] < 100 {
			t.Errorf("series %d colour %v covers %d pixels; its line is missing", i, palette[i], found[palette[i]])
		}
	}
	if found[palette[len(c.Series)]] != 0 {
		t.Errorf("colour of a fourth series %v drawn on a chart of three", palette[len(c.Series)])
	}
}

func TestWritePNG_DecodesAtTheRequestedSize(t *testing.T) {
	var b bytes.Buffer
	c := CDF{Series: []Series{{Label: "a", Values: []float64{3}}}, Width: 640, Height: 480}
	if err := c.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != 640 || got.Y != 480 {
		t.Fatalf("PNG is %v, want 640x480", got)
	}
}

func TestWritePNG_WithoutAPositiveFiniteValueIsErrNoData(t *testing.T) {
	for name, values := range map[string][]float64{
		"no values":             nil,
		"zero and negatives":    {0, -3},
		"not a number, +/- inf": {math.NaN(), math.Inf(1), math.Inf(-1)},
	} {
		t.Run(name, func(t *testing.T) {
			err := CDF{Series: []Series{{Label: "empty", Values: values}}}.WritePNG(io.Discard)
			if !errors.Is(err, ErrNoData) {
				t.Fatalf("err = %v, want ErrNoData", err)
			}
		})
	}
}

func TestCDFSteps(t *testing.T) {
	cases := []struct {
		name   string
		values []float64
		want   plotter.XYs
	}{
		{"one step per value, up to 1", []float64{30, 10, 20},
			plotter.XYs{{X: 1, Y: 0}, {X: 10, Y: 1. / 3}, {X: 20, Y: 2. / 3}, {X: 30, Y: 1}, {X: 100, Y: 1}}},
		{"equal values make one step", []float64{10, 10, 50, 50},
			plotter.XYs{{X: 1, Y: 0}, {X: 10, Y: 0.5}, {X: 50, Y: 1}, {X: 100, Y: 1}}},
		{"zero and negatives start at the left edge", []float64{0, -1, 10, 20},
			plotter.XYs{{X: 1, Y: 0.5}, {X: 10, Y: 0.75}, {X: 20, Y: 1}, {X: 100, Y: 1}}},
		{"infinite and NaN values keep the line below 1", []float64{10, math.Inf(1), math.NaN(), 20},
			plotter.XYs{{X: 1, Y: 0}, {X: 10, Y: 0.25}, {X: 20, Y: 0.5}, {X: 100, Y: 0.5}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := cdfSteps(c.values, 1, 100); !slices.Equal(got, c.want) {
				t.Fatalf("cdfSteps(%v) = %v, want %v", c.values, got, c.want)
			}
		})
	}
}

func TestLogTimeTicks(t *testing.T) {
	cases := []struct {
		name   string
		minGap float64
		lo, hi float64
		want   []string // labels; "" is a minor tick
	}{
		{"every tick in range labelled when there is room", 0.1, 1, 1e4,
			[]string{"1s", "10s", "1m", "10m", "30m", "1h"}},
		{"crowded labels become minor ticks", 0.5, 1, 1e5,
			[]string{"1s", "10s", "1m", "10m", "", "1h", "", "6h", "", "1d"}},
		{"nothing outside the range", 0.1, 100, 1000, []string{"10m"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, tick := range logTimeTicks(c.minGap).Ticks(c.lo, c.hi) {
				got = append(got, tick.Label)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("labels %q, want %q", got, c.want)
			}
		})
	}
}
