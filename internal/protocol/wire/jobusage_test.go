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
		{"memory past MaxGPUMemMB is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemUsedMB = MaxGPUMemMB + 1 }, false},
		{"the GPU's memory is accepted", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemTotalMB = 81920 }, true},
		{"negative GPU memory is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemTotalMB = -1 }, false},
		{"NaN GPU memory is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemTotalMB = math.NaN() }, false},
		{"infinite GPU memory is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemTotalMB = math.Inf(1) }, false},
		{"GPU memory past MaxGPUMemMB is refused", func(r *JobUsageReport) { r.Jobs[0].GPUs[0].MemTotalMB = MaxGPUMemMB + 1 }, false},
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

// The layout of a job's GPU before mem_total_mb: what an older agent
// sends and an older controller reads.
type oldJobUsageReport struct {
	Node string `codec:"node"`
	Jobs []struct {
		JobID uint32 `codec:"job"`
		UID   uint32 `codec:"uid"`
		GPUs  []struct {
			Index     int     `codec:"index"`
			UUID      string  `codec:"uuid"`
			UtilPct   float64 `codec:"util_pct"`
			MemUsedMB float64 `codec:"mem_used_mb"`
			Sharers   int     `codec:"sharers"`
		} `codec:"gpus"`
	} `codec:"jobs"`
}

// mem_total_mb is an optional key: a newer agent's report reads in an
// older controller (the key skipped), and an older agent's reads here
// with the GPU's memory unknown (0), still valid.
func TestJobUsageGPUMemoryIsCompatibleBothWays(t *testing.T) {
	in := validUsage()
	in.Jobs[0].GPUs[0].MemTotalMB = 81920
	b, err := Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var old oldJobUsageReport
	if err := Unmarshal(b, &old); err != nil {
		t.Fatalf("an older controller cannot read a newer report: %v", err)
	}
	if len(old.Jobs) != 1 || len(old.Jobs[0].GPUs) != 1 || old.Jobs[0].GPUs[0].MemUsedMB != 900 {
		t.Fatalf("older controller read %+v", old)
	}
	var back JobUsageReport
	if err := Unmarshal(b, &back); err != nil || back.Jobs[0].GPUs[0].MemTotalMB != 81920 {
		t.Fatalf("round trip: %+v, %v", back.Jobs, err)
	}
	b, err = Marshal(&old)
	if err != nil {
		t.Fatal(err)
	}
	var out JobUsageReport
	if err := Unmarshal(b, &out); err != nil {
		t.Fatalf("an older agent's report does not read: %v", err)
	}
	out.Node = "n1"
	if err := out.Validate(); err != nil || out.Jobs[0].GPUs[0].MemTotalMB != 0 || out.Jobs[0].GPUs[0].MemUsedMB != 900 {
		t.Fatalf("an older agent's report: %+v, %v", out.Jobs, err)
	}
}
