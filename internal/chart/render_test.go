package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/color"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// knee3OnTwoCores is a recorded profile of the synthetic job with its knee
// at 3 cores, on a 2-core node.
func knee3OnTwoCores() profile.Record {
	start := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	return profile.Record{
		ID: "0f6d3c2e-1111-4222-8333-444455556666", Model: "synth-knee3", Node: "ci", User: "root", GPUs: 1,
		Started: start, Finished: start.Add(9 * time.Second), Signal: "regex",
		CPUSweep: []profile.Measurement{
			{CPUs: 1, Throughput: 121, Samples: 6, Seconds: 2},
			{CPUs: 2, Throughput: 240, Samples: 6, Seconds: 2},
		},
		DatasetBytes: 16 << 20, DiskBW: 900 << 20, MemBW: 9 * (1 << 30),
		Matrix: sensitivity.Profile{Model: "synth-knee3", CPUs: []int{1, 2}, MemGB: []float64{1, 23.5},
			Throughput: [][]float64{{0.5, 0.5}, {1, 1}}},
		Best:      sensitivity.Demand{CPUsPerGPU: 2, MemGBPerGPU: 1},
		Tolerance: 0.1,
	}
}

func TestRender_TextSaysTheModelMayWantMoreThanTheNodeHas(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, knee3OnTwoCores(), "text"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"profile synth-knee3", "needs ≥ 2 of 2 cores", "may want more CPUs than this node has",
		"best case: 2 CPUs and 1.00 GB per GPU (2 CPUs for the workload)", "1.00*", "dataset 16 MiB"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

func TestRender_TextOfAKneeBelowTheNodeMakesNoSuchClaim(t *testing.T) {
	r := knee3OnTwoCores()
	r.CPUSweep[0].Throughput = 239
	r.Best.CPUsPerGPU = 1
	var b bytes.Buffer
	if err := Render(&b, r, "text"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "needs ≥") {
		t.Errorf("a 1-core best case on 2 cores claims more:\n%s", b.String())
	}
}

func TestRender_SVGIsWellFormedXML(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, knee3OnTwoCores(), "svg"); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(&b)
	texts := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "text" {
			texts++
		}
	}
	if texts < 8 {
		t.Errorf("SVG has %d text elements; axes and labels are missing", texts)
	}
}

func TestRender_PNGDecodesAtTheChartSize(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, knee3OnTwoCores(), "png"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Size(); got.X != chartWidth || got.Y != chartHeight {
		t.Fatalf("PNG is %v, want %dx%d", got, chartWidth, chartHeight)
	}
}

func TestRender_ChartsOfOddRecordsAreDrawnNotRefused(t *testing.T) {
	cases := []struct {
		name  string
		sweep []profile.Measurement
	}{
		{"no sweep", nil},
		{"zero throughput", []profile.Measurement{{CPUs: 1}, {CPUs: 2}}},
		{"a measurement that is not a number", []profile.Measurement{{CPUs: 1, Throughput: math.NaN()}, {CPUs: 2, Throughput: 50}}},
		{"an infinite measurement", []profile.Measurement{{CPUs: 1, Throughput: 10}, {CPUs: 2, Throughput: math.Inf(1)}}},
	}
	for _, c := range cases {
		for _, format := range []string{"svg", "png"} {
			t.Run(c.name+" as "+format, func(t *testing.T) {
				r := knee3OnTwoCores()
				r.CPUSweep = c.sweep
				var b bytes.Buffer
				if err := Render(&b, r, format); err != nil || b.Len() == 0 {
					t.Fatalf("err = %v, %d bytes", err, b.Len())
				}
			})
		}
	}
}

func TestRender_UnknownFormatIsAnError(t *testing.T) {
	if err := Render(io.Discard, knee3OnTwoCores(), "pdf"); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("err = %v, want ErrUnknownFormat", err)
	}
}

func TestRender_PNGShowsTheSweepTheBandAndTheBestCase(t *testing.T) {
	var b bytes.Buffer
	if err := Render(&b, knee3OnTwoCores(), "png"); err != nil {
		t.Fatal(err)
	}
	found := colours(t, &b)
	for name, want := range map[string]color.RGBA{"sweep": sweepColour, "band fill": bandFill,
		"band edge": bandColour, "best case": bestColour} {
		if found[want] < 50 {
			t.Errorf("%s colour %v covers %d pixels; it is not drawn", name, want, found[want])
		}
	}
}

func TestNiceTicks(t *testing.T) {
	cases := []struct {
		name string
		top  float64
		want []float64
	}{
		{"round hundreds", 276, []float64{0, 100, 200, 300}},
		{"steps of 2.5", 11, []float64{0, 2.5, 5, 7.5, 10, 12.5}},
		{"steps of 0.02 without rounding error", 0.09, []float64{0, 0.02, 0.04, 0.06, 0.08, 0.1}},
		{"nothing to show", 0, []float64{0, 1}},
		{"not a number", math.NaN(), []float64{0, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := niceTicks(c.top)
			if len(got) != len(c.want) {
				t.Fatalf("ticks %v, want %v", got, c.want)
			}
			for i := range got {
				if math.Abs(got[i]-c.want[i]) > 1e-12 {
					t.Fatalf("ticks %v, want %v", got, c.want)
				}
			}
		})
	}
}

func TestCPUTicks(t *testing.T) {
	cases := []struct {
		name    string
		maxCPUs int
		want    []int
	}{
		{"every count on a small node", 4, []int{0, 1, 2, 3, 4}},
		{"every count up to 16", 16, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
		{"steps of 4 on 48 cores", 48, []int{0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48}},
		{"steps of 16 on 256 cores", 256, []int{0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := cpuTicks(c.maxCPUs); !slices.Equal(got, c.want) {
				t.Fatalf("cpuTicks(%d) = %v, want %v", c.maxCPUs, got, c.want)
			}
		})
	}
}

// colours decodes a PNG and counts its pixels by colour.
func colours(t *testing.T, r io.Reader) map[color.RGBA]int {
	t.Helper()
	img, err := png.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	found := map[color.RGBA]int{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, a := img.At(x, y).RGBA()
			found[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), uint8(a >> 8)}]++
		}
	}
	return found
}
