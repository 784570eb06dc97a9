package agent

import (
	"os/exec"
	"reflect"
	"testing"
	"time"

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
		{GPU: 0, UUID: "GPU-a", PID: 11, UtilPct: 70, UtilKnown: true, MemUsedMB: 1000, MemTotalMB: 81920},
		{GPU: 0, UUID: "GPU-a", PID: 10, UtilPct: 50, UtilKnown: true, MemUsedMB: 500, MemTotalMB: 81920},
		{GPU: 1, UUID: "GPU-b", PID: 10, UtilPct: 20, UtilKnown: true, MemUsedMB: 300},
		{GPU: 0, UUID: "GPU-a", PID: 20, UtilPct: 25, UtilKnown: true, MemUsedMB: 4000, MemTotalMB: 81920},
		{GPU: 0, UUID: "GPU-a", PID: 30, UtilPct: 90, UtilKnown: true, MemUsedMB: 9000},
		{GPU: 1, UUID: "GPU-b", PID: 40, UtilPct: 90, UtilKnown: true, MemUsedMB: 9000},
		{GPU: 1, UUID: "GPU-b", PID: 50, UtilPct: 90, UtilKnown: true, MemUsedMB: 9000}, // vanished
		{GPU: 2, UUID: "GPU-c", PID: 20, MemUsedMB: 100},                                // no sample: unknown, not idle
	}
	jobs, unaccounted, outside := gpuUseOf(procs, jobOf.of, nil)
	// GPU 0 holds jobs 7 and 9 and a process of no job; GPU 1 job 7 and
	// another uid's process under its number: three and two sharers.
	want := []wire.JobUsage{
		{JobID: 7, UID: 1000, GPUs: []wire.JobGPUUsage{
			{Index: 0, UUID: "GPU-a", UtilPct: 100, MemUsedMB: 1500, MemTotalMB: 81920, Sharers: 3},
			{Index: 1, UUID: "GPU-b", UtilPct: 20, MemUsedMB: 300, Sharers: 2}, // the GPU's memory unknown
		}},
		{JobID: 9, UID: 2000, GPUs: []wire.JobGPUUsage{
			{Index: 0, UUID: "GPU-a", UtilPct: 25, MemUsedMB: 4000, MemTotalMB: 81920, Sharers: 3},
			{Index: 2, UUID: "GPU-c", UtilUnknown: true, MemUsedMB: 100, Sharers: 1},
		}},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("got  %+v\nwant %+v", jobs, want)
	}
	wantU := []wire.UnaccountedGPUUse{
		{Index: 0, UUID: "GPU-a", UID: 1000, UtilPct: 90, MemUsedMB: 9000, Processes: 1},
		{Index: 1, UUID: "GPU-b", UID: 2000, UtilPct: 90, MemUsedMB: 9000, Processes: 1},
	}
	if !reflect.DeepEqual(unaccounted, wantU) {
		t.Fatalf("unaccounted %+v\nwant %+v", unaccounted, wantU)
	}
	if w := map[string]int{procjob.NoJob: 1, procjob.Gone: 1, outsideOtherUID: 1, outsideMPSServer: 0}; !reflect.DeepEqual(outside, w) {
		t.Fatalf("outside %v, want %v", outside, w)
	}
	rep := wire.JobUsageReport{Node: "n", Jobs: jobs, IntervalSec: 1, Unaccounted: unaccounted}
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
	jobs, _, _ := gpuUseOf(procs, jobOf.of, nil)
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

// CUDA MPS as the device lists it, as docs/gpu-check.md measured it on an
// H200: each client is listed by its own pid with its memory and no
// utilisation; the server's pid holds its own memory and all the
// clients' utilisation. The clients are attributed to their jobs; the
// server is no job's and no sharer: its memory is unaccounted use, its
// utilisation not counted a second time. A hidden process of a guest's
// user beside them is unaccounted use and a sharer.
func TestMPSClientsAreAttributedAndTheServerNotCountedTwice(t *testing.T) {
	procs := []telemetry.GPUProcess{
		{GPU: 0, UUID: "GPU-h", PID: 857, MemUsedMB: 2566, MemTotalMB: 143771},
		{GPU: 0, UUID: "GPU-h", PID: 868, UtilPct: 82, UtilKnown: true, MemUsedMB: 66, MemTotalMB: 143771},
		{GPU: 0, UUID: "GPU-h", PID: 885, MemUsedMB: 6662, MemTotalMB: 143771},
	}
	jobOf := lookups{
		857: {job: 7, uid: 1000},
		868: {uid: 0, why: procjob.NoJob},
		885: {job: 9, uid: 2000},
	}
	server := func(pid int) bool { return pid == 868 }
	jobs, unaccounted, outside := gpuUseOf(procs, jobOf.of, server)
	// The clients had no sample (the telemetry path leaves their
	// utilisation unknown on a busy GPU): unknown, not idle.
	want := []wire.JobUsage{
		{JobID: 7, UID: 1000, GPUs: []wire.JobGPUUsage{{Index: 0, UUID: "GPU-h", UtilUnknown: true, MemUsedMB: 2566, MemTotalMB: 143771, Sharers: 2}}},
		{JobID: 9, UID: 2000, GPUs: []wire.JobGPUUsage{{Index: 0, UUID: "GPU-h", UtilUnknown: true, MemUsedMB: 6662, MemTotalMB: 143771, Sharers: 2}}},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("got  %+v\nwant %+v", jobs, want)
	}
	wantU := []wire.UnaccountedGPUUse{{Index: 0, UUID: "GPU-h", UID: 0, MemUsedMB: 66, MemTotalMB: 143771, Processes: 1}}
	if !reflect.DeepEqual(unaccounted, wantU) {
		t.Fatalf("unaccounted %+v\nwant %+v (the server's memory, not its clients' utilisation)", unaccounted, wantU)
	}
	if outside[outsideMPSServer] != 1 || outside[procjob.NoJob] != 0 {
		t.Fatalf("outside %v", outside)
	}
	// The server is not read as a server once it is in a job (a user's
	// own MPS inside their step): then it is that job's.
	jobOf[868] = struct {
		job, uid uint32
		why      string
	}{job: 7, uid: 1000}
	jobs, unaccounted, _ = gpuUseOf(procs, jobOf.of, server)
	if g := jobs[0].GPUs[0]; len(unaccounted) != 0 || g.UtilPct != 82 || g.UtilUnknown || g.MemUsedMB != 2566+66 {
		t.Fatalf("a server inside job 7: %+v, unaccounted %+v", jobs, unaccounted)
	}
	// A guest's process that left its step (no job) beside the clients:
	// unaccounted under its uid, and a sharer.
	procs = append(procs, telemetry.GPUProcess{GPU: 0, UUID: "GPU-h", PID: 900, UtilPct: 30, UtilKnown: true, MemUsedMB: 20000, MemTotalMB: 143771})
	jobOf[900] = struct {
		job, uid uint32
		why      string
	}{uid: 2000, why: procjob.NoJob}
	jobs, unaccounted, _ = gpuUseOf(procs, jobOf.of, server)
	wantU = []wire.UnaccountedGPUUse{{Index: 0, UUID: "GPU-h", UID: 2000, UtilPct: 30, MemUsedMB: 20000, MemTotalMB: 143771, Processes: 1}}
	if !reflect.DeepEqual(unaccounted, wantU) || jobs[0].GPUs[0].Sharers != 3 {
		t.Fatalf("a hidden process: %+v, unaccounted %+v", jobs, unaccounted)
	}
}

// A job that just ended leaves its GPU process behind for a moment: dead
// but not reaped (a zombie: its slurmstepd gone, maybe its job cgroup
// too) or already vanished from /proc while the device still lists it.
// Neither is use of no job: the lone job on the GPU is reported alone
// and nothing is charged to its user's guests.
func TestAnEndedJobsLingeringProcessIsNeitherUseNorASharer(t *testing.T) {
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zombie.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st, err := procjob.ReadStatus(zombie.Process.Pid); err != nil || st.Exited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit in 10 s")
		}
	}
	const host, vanished = 1 << 29, 1<<29 + 1
	jobOf := func(pid int) (uint32, uint32, string) {
		switch pid {
		case host:
			return 96002, 1000, ""
		case vanished:
			return 0, 0, procjob.Gone
		}
		return procjob.GPUProcessJob(pid) // the kernel's word on the zombie
	}
	procs := []telemetry.GPUProcess{
		{GPU: 0, UUID: "GPU-a", PID: host, UtilPct: 98, UtilKnown: true, MemUsedMB: 500, MemTotalMB: 16384},
		{GPU: 0, UUID: "GPU-a", PID: zombie.Process.Pid, UtilPct: 90, UtilKnown: true, MemUsedMB: 20000},
		{GPU: 0, UUID: "GPU-a", PID: vanished, UtilPct: 50, UtilKnown: true, MemUsedMB: 4096},
	}
	jobs, unaccounted, outside := gpuUseOf(procs, jobOf, nil)
	want := []wire.JobUsage{{JobID: 96002, UID: 1000, GPUs: []wire.JobGPUUsage{
		{Index: 0, UUID: "GPU-a", UtilPct: 98, MemUsedMB: 500, MemTotalMB: 16384, Sharers: 1}}}}
	if !reflect.DeepEqual(jobs, want) || len(unaccounted) != 0 {
		t.Fatalf("jobs %+v, unaccounted %+v; want the host alone and nothing unaccounted", jobs, unaccounted)
	}
	if outside[procjob.Gone] != 2 || outside[procjob.NoJob] != 0 {
		t.Fatalf("outside %v, want both gone", outside)
	}
}
