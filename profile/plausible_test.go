package profile

import (
	"errors"
	"math"
	"testing"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

func TestCheckRefusesAbsurdProfiles(t *testing.T) {
	good := Record{ID: "x", Model: "bert", GPUs: 2, Tolerance: 0.02,
		CPUSweep: []Measurement{{CPUs: 4, Throughput: 10, Seconds: 3}},
		Best:     sensitivity.Demand{CPUsPerGPU: 3, MemGBPerGPU: 20}}
	cases := []struct {
		name string
		mod  func(*Record)
		ok   bool
	}{
		{"a real profile is accepted", func(*Record) {}, true},
		{"the memory floor itself is accepted", func(r *Record) { r.Best.MemGBPerGPU = sensitivity.MinMemGBPerGPU }, true},
		{"1e-9 GB per GPU is refused", func(r *Record) { r.Best.MemGBPerGPU = 1e-9 }, false},
		{"1e300 GB per GPU is refused", func(r *Record) { r.Best.MemGBPerGPU = 1e300 }, false},
		{"NaN GB per GPU is refused", func(r *Record) { r.Best.MemGBPerGPU = math.NaN() }, false},
		{"infinite GB per GPU is refused", func(r *Record) { r.Best.MemGBPerGPU = math.Inf(1) }, false},
		{"negative GB per GPU is refused", func(r *Record) { r.Best.MemGBPerGPU = -4 }, false},
		{"zero CPUs per GPU is refused", func(r *Record) { r.Best.CPUsPerGPU = 0 }, false},
		{"negative CPUs per GPU is refused", func(r *Record) { r.Best.CPUsPerGPU = -3 }, false},
		{"a huge CPU count is refused", func(r *Record) { r.Best.CPUsPerGPU = 1 << 40 }, false},
		{"CPUs just above the bound are refused", func(r *Record) { r.Best.CPUsPerGPU = sensitivity.MaxCPUsPerGPU + 1 }, false},
		{"negative GPUs are refused", func(r *Record) { r.GPUs = -1 }, false},
		{"a tolerance of 1 is refused", func(r *Record) { r.Tolerance = 1 }, false},
		{"a NaN tolerance is refused", func(r *Record) { r.Tolerance = math.NaN() }, false},
		{"a negative dataset is refused", func(r *Record) { r.DatasetBytes = -1 }, false},
		{"an infinite bandwidth is refused", func(r *Record) { r.DiskBW = math.Inf(1) }, false},
		{"a sweep point of zero CPUs is refused", func(r *Record) { r.CPUSweep = []Measurement{{CPUs: 0, Throughput: 1}} }, false},
		{"a negative throughput is refused", func(r *Record) { r.CPUSweep = []Measurement{{CPUs: 1, Throughput: -1}} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := good
			r.CPUSweep = append([]Measurement(nil), good.CPUSweep...)
			c.mod(&r)
			err := r.Check()
			if (err == nil) != c.ok {
				t.Fatalf("Check() = %v; want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrImplausible) {
				t.Fatalf("error %v does not wrap ErrImplausible", err)
			}
			if err != nil && len(err.Error()) > 200 {
				t.Fatalf("error of %d bytes: numbers must be formatted short: %s", len(err.Error()), err)
			}
		})
	}
}
