package profiler

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRegexWatch_Result(t *testing.T) {
	t0 := time.Unix(1000, 0)
	warm := t0.Add(3 * time.Second)
	cases := []struct {
		name    string
		lines   map[time.Duration]string
		want    float64
		n       int
		wantErr error
	}{
		{"median of the readings after warm-up", map[time.Duration]string{
			1 * time.Second: "step 10 99.0 it/s", // warm-up, ignored
			4 * time.Second: "step 20 10.0 it/s",
			5 * time.Second: "step 30 12.0 it/s",
			6 * time.Second: "step 40 50.0 it/s",
		}, 12, 3, nil},
		{"lines without a match are ignored", map[time.Duration]string{
			4 * time.Second: "loading checkpoint",
			5 * time.Second: "epoch 1: 8 it/s, loss 0.3",
		}, 8, 1, nil},
		{"only warm-up readings: all but the first are used", map[time.Duration]string{
			1 * time.Second: "100 it/s",
			2 * time.Second: "20 it/s",
		}, 20, 1, nil},
		{"a single reading is used even in warm-up", map[time.Duration]string{
			1 * time.Second: "7.5it/s",
		}, 7.5, 1, nil},
		{"no matching line is no throughput", map[time.Duration]string{
			4 * time.Second: "hello",
		}, 0, 0, ErrNoThroughput},
		{"all-zero readings are no throughput, not a zero profile", map[time.Duration]string{
			4 * time.Second: "0 it/s",
			5 * time.Second: "0.0 it/s",
		}, 0, 2, ErrNoThroughput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := regexSignal{regexp.MustCompile(DefaultRegex)}.Watch(context.Background())
			var at []time.Duration
			for d := range c.lines {
				at = append(at, d)
			}
			slices.Sort(at)
			for _, d := range at {
				w.Line(t0.Add(d), c.lines[d])
			}
			got, n, err := w.Result(warm)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && (got != c.want || n != c.n)) {
				t.Fatalf("Result = %v, %d, %v; want %v, %d, %v", got, n, err, c.want, c.n, c.wantErr)
			}
		})
	}
}

func TestReadLines_SplitsAtNewlinesAndCarriageReturns(t *testing.T) {
	in := "step 1 5 it/s\n\r 10%|#   | 3.2it/s\r 20%|##  | 3.4it/s\r\nlast line without newline"
	var got []string
	readLines(strings.NewReader(in), func(s string) { got = append(got, s) })
	want := []string{"step 1 5 it/s", " 10%|#   | 3.2it/s", " 20%|##  | 3.4it/s", "last line without newline"}
	if !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
}

func TestReadLines_CapsVeryLongLines(t *testing.T) {
	in := strings.Repeat("x", 3*maxLine) + "\nnext\n"
	var got []string
	readLines(strings.NewReader(in), func(s string) { got = append(got, s) })
	if len(got) != 2 || len(got[0]) != maxLine || got[1] != "next" {
		t.Fatalf("got %d lines, first %d bytes", len(got), len(got[0]))
	}
}

func TestSpecNormalise(t *testing.T) {
	cases := []struct {
		name    string
		spec    SweepSpec
		wantErr bool
	}{
		{"defaults fill in", SweepSpec{Argv: []string{"x"}}, false},
		{"no command", SweepSpec{}, true},
		{"regex without a capture group", SweepSpec{Argv: []string{"x"}, Regex: `[0-9]+ it/s`}, true},
		{"regex that does not compile", SweepSpec{Argv: []string{"x"}, Regex: `(`}, true},
		{"tolerance of 1 or more", SweepSpec{Argv: []string{"x"}, Tolerance: 1}, true},
		{"more GPUs than the node", SweepSpec{Argv: []string{"x"}, GPUs: 4, NodeGPUs: 2}, true},
		{"NVML needs no regex", SweepSpec{Argv: []string{"x"}, UseNVML: true, Regex: `(`}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := c.spec.normalise()
			if c.wantErr {
				if !errors.Is(err, ErrBadSpec) {
					t.Fatalf("err = %v, want ErrBadSpec", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.PointDuration != DefaultPointDuration && c.spec.PointDuration == 0 ||
				n.Tolerance != DefaultTolerance || n.gpus < 1 || n.NodeGPUs < n.gpus {
				t.Fatalf("defaults not filled in: %+v", n)
			}
		})
	}
}
