package wire

import (
	"errors"
	"math"
	"testing"
	"time"
)

func validUsage() JobUsageReport {
	return JobUsageReport{Node: "n1", At: time.Unix(1e9, 0), IntervalSec: 10, Jobs: []JobUsage{{
		JobID: 7, UID: 1000,
		GPUs:     []JobGPUUsage{{Index: 0, UUID: "GPU-x", UtilPct: 40, MemUsedMB: 900, Sharers: 2}},
		Progress: &JobProgress{Iterations: 10, ItersPerSec: 2.5},
	}}}
}

func TestJobUsageValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *JobUsageReport)
		ok   bool
	}{
		{"valid report is accepted", func(*JobUsageReport) {}, true},
		{"report without jobs is accepted", func(r *JobUsageReport) { r.Jobs = nil }, true},
		{"no node is refused", func(r *JobUsageReport) { r.Node = "" }, false},
		{"job id 0 is refused", func(r *JobUsageReport) { r.Jobs[0].JobID = 0 }, false},
		{"utilisation over 100 is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].UtilPct = 101 }, false},
		{"NaN memory is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemUsedMB = math.NaN() }, false},
		{"zero sharers is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].Sharers = 0 }, false},
		{"negative GPU index is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].Index = -1 }, false},
		{"infinite rate is refused", func(r *JobUsageReport) { r.Jobs[0].Progress.ItersPerSec = math.Inf(1) }, false},
		{"too many jobs are refused", func(r *JobUsageReport) { r.Jobs = make([]JobUsage, MaxUsageJobs+1) }, false},
		{"too many job GPUs are refused", func(r *JobUsageReport) {
			r.Jobs[0].GPUs = make([]JobGPUUsage, MaxGPUs+1)
			for i := range r.Jobs[0].GPUs {
				r.Jobs[0].GPUs[i] = JobGPUUsage{Index: i % MaxGPUs, Sharers: 1}
			}
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := validUsage()
			tc.edit(&r)
			err := r.Validate()
			if tc.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrBody) {
				t.Fatalf("error %v does not wrap ErrBody", err)
			}
		})
	}
}

func TestJobUsageRoundTrips(t *testing.T) {
	if !TypeJobUsage.Known() || !TypeJobUsage.IsReport() || TypeJobUsage.String() != "job-usage" {
		t.Fatalf("TypeJobUsage: known %v report %v name %q", TypeJobUsage.Known(), TypeJobUsage.IsReport(), TypeJobUsage)
	}
	in := validUsage()
	b, err := Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var out JobUsageReport
	if err := Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if err := out.Validate(); err != nil {
		t.Fatal(err)
	}
	if out.Jobs[0].GPUs[0].Sharers != 2 || out.Jobs[0].Progress == nil || out.Jobs[0].Progress.ItersPerSec != 2.5 {
		t.Fatalf("round trip lost fields: %+v", out.Jobs[0])
	}
}
