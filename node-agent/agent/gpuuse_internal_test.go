package agent

import (
	"reflect"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/procjob"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// lookups is a ProcessJobLookup from a table: pid → job, uid, why.
type lookups map[int]struct {
	job, uid uint32
	why      string
}

func (l lookups) of(pid int) (uint32, uint32, string) {
	e, ok := l[pid]
	if !ok {
		return 0, 0, procjob.Gone
	}
	return e.job, e.uid, e.why
}

func TestGPUUseIsAggregatedPerJobAndGPU(t *testing.T) {
	jobOf := lookups{
		10: {job: 7, uid: 1000}, 11: {job: 7, uid: 1000}, // job 7: two processes on GPU 0, one on GPU 1
		20: {job: 9, uid: 2000},             // job 9 shares GPU 0
		30: {uid: 1000, why: procjob.NoJob}, // a login-shell process on GPU 0
		40: {job: 7, uid: 2000},             // job 7's number, another uid
	}
	procs := []telemetry.GPUProcess{
		{GPU: 0, UUID: "GPU-a", PID: 11, UtilPct: 70, MemUsedMB: 1000, MemTotalMB: 81920},
		{GPU: 0, UUID: "GPU-a", PID: 10, UtilPct: 50, MemUsedMB: 500, MemTotalMB: 81920},
		{GPU: 1, UUID: "GPU-b", PID: 10, UtilPct: 20, MemUsedMB: 300},
		{GPU: 0, UUID: "GPU-a", PID: 20, UtilPct: 25, MemUsedMB: 4000, MemTotalMB: 81920},
		{GPU: 0, UUID: "GPU-a", PID: 30, UtilPct: 90, MemUsedMB: 9000},
		{GPU: 1, UUID: "GPU-b", PID: 40, UtilPct: 90, MemUsedMB: 9000},
		{GPU: 1, UUID: "GPU-b", PID: 50, UtilPct: 90, MemUsedMB: 9000}, // vanished
	}
	jobs, outside := gpuUseOf(procs, jobOf.of)
	want := []wire.JobUsage{
		{JobID: 7, UID: 1000, GPUs: []wire.JobGPUUsage{
			{Index: 0, UUID: "GPU-a", UtilPct: 100, MemUsedMB: 1500, MemTotalMB: 81920, Sharers: 2},
			{Index: 1, UUID: "GPU-b", UtilPct: 20, MemUsedMB: 300, Sharers: 1}, // the GPU's memory unknown
		}},
		{JobID: 9, UID: 2000, GPUs: []wire.JobGPUUsage{
			{Index: 0, UUID: "GPU-a", UtilPct: 25, MemUsedMB: 4000, MemTotalMB: 81920, Sharers: 2},
		}},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("got  %+v\nwant %+v", jobs, want)
	}
	if w := map[string]int{procjob.NoJob: 1, procjob.Gone: 1, outsideOtherUID: 1}; !reflect.DeepEqual(outside, w) {
		t.Fatalf("outside %v, want %v", outside, w)
	}
	rep := wire.JobUsageReport{Node: "n", Jobs: jobs, IntervalSec: 1}
	if err := rep.Validate(); err != nil {
		t.Fatalf("the report does not validate: %v", err)
	}
}

func TestGPUUseStaysWithinTheWireBounds(t *testing.T) {
	var procs []telemetry.GPUProcess
	jobOf := lookups{}
	for pid := 1; pid <= wire.MaxGPUs+10; pid++ {
		procs = append(procs, telemetry.GPUProcess{GPU: pid % 8, PID: pid})
		jobOf[pid] = struct {
			job, uid uint32
			why      string
		}{job: uint32(pid), uid: 1}
	}
	jobs, _ := gpuUseOf(procs, jobOf.of)
	rep := wire.JobUsageReport{Node: "n", Jobs: jobs}
	if err := rep.Validate(); err != nil || len(jobs) != wire.MaxGPUs {
		t.Fatalf("%d jobs, %v: want %d, valid", len(jobs), err, wire.MaxGPUs)
	}
}

func TestProgressGoesToItsJobOnly(t *testing.T) {
	jobs := []wire.JobUsage{{JobID: 7}, {JobID: 9}}
	withProgress(jobs, map[uint32]wire.JobProgress{9: {Iterations: 120, ItersPerSec: 4}, 11: {Iterations: 1}})
	if jobs[0].Progress != nil || jobs[1].Progress == nil || jobs[1].Progress.Iterations != 120 || len(jobs) != 2 {
		t.Fatalf("got %+v", jobs)
	}
}
