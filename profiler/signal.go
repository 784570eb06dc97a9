package profiler

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Signal is where a sweep point's throughput comes from.
type Signal interface {
	// Name is what Record.Signal says: "regex" or "nvml".
	Name() string
	// Watch starts observing one sweep point. It stops sampling on its own
	// (if it samples at all) when ctx is done.
	Watch(ctx context.Context) Watch
}

// Watch gathers one sweep point's throughput readings.
type Watch interface {
	// Line is called with every line of the workload's output.
	Line(at time.Time, line string)
	// Result is the point's throughput from the readings taken at or after
	// warmEnd, and how many readings it rests on. It wraps ErrNoThroughput
	// when there is nothing usable. Call it after the point has ended.
	Result(warmEnd time.Time) (float64, int, error)
}

// reading is one throughput value and when it was taken.
type reading struct {
	at    time.Time
	value float64
}

// regexSignal reads throughput from the workload's output.
type regexSignal struct{ re *regexp.Regexp }

var _ Signal = regexSignal{}

func (regexSignal) Name() string { return "regex" }

func (s regexSignal) Watch(context.Context) Watch { return &regexWatch{re: s.re} }

type regexWatch struct {
	re       *regexp.Regexp
	mu       sync.Mutex
	readings []reading
}

var _ Watch = (*regexWatch)(nil)

func (w *regexWatch) Line(at time.Time, line string) {
	m := w.re.FindStringSubmatch(line)
	if m == nil {
		return
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || !finite(v) || v < 0 {
		return
	}
	w.mu.Lock()
	w.readings = append(w.readings, reading{at, v})
	w.mu.Unlock()
}

// Result is the median of the readings after warm-up. Each reading is
// already a rate over an interval the workload chose, so the median keeps
// one slow interval (a checkpoint, a GC pause, a neighbour's burst) from
// moving the point.
func (w *regexWatch) Result(warmEnd time.Time) (float64, int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.readings) == 0 {
		return 0, 0, fmt.Errorf("%w: no output line matched %q", ErrNoThroughput, w.re.String())
	}
	vals := steadyValues(w.readings, warmEnd)
	v := median(vals)
	if v == 0 {
		return 0, len(vals), fmt.Errorf("%w: %d readings matched %q, all zero", ErrNoThroughput, len(vals), w.re.String())
	}
	return v, len(vals), nil
}

// steadyValues are the readings taken at or after warmEnd. A point whose
// workload reports less often than that leaves none; then every reading but
// the first (which covers start-up) is used, and as a last resort the one
// reading there is.
func steadyValues(rs []reading, warmEnd time.Time) []float64 {
	var out []float64
	for _, r := range rs {
		if !r.at.Before(warmEnd) {
			out = append(out, r.value)
		}
	}
	if len(out) == 0 && len(rs) > 1 {
		for _, r := range rs[1:] {
			out = append(out, r.value)
		}
	}
	if len(out) == 0 {
		out = []float64{rs[0].value}
	}
	return out
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func mean(vs []float64) float64 {
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	return sum / float64(len(vs))
}
