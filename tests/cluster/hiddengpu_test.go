package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 34 item 1: a guest hides its GPU process. The test user's
// opportunistic job starts its GPU process (the synthetic job, feeding
// the fake GPU device) with `setsid -f` and sleeps: the process leaves
// its step's process tree, so no root slurmstepd is among its ancestors.
// Beside a guaranteed job that peaks at 60000 MiB of the fake GPU's
// 81920 (13728 MiB of room with the default 10% headroom), the hidden
// process fits at 4096 MiB and is kept; grown to 20000 MiB it is
// requeued within a pass or two, as a visible guest would be, and the
// host runs on untouched. Before the fix the agent put the process in no
// job, the host's report said it was alone on the GPU, and the guest
// grew on unbounded.
//
// With job cgroups (proctrack/cgroup) the process is still in its job's
// cgroup, which root owns and it cannot leave: the agent attributes it
// to its job. Without (proctrack/linuxproc) it is in no job: the agent
// reports its use as no job's, under its uid, and the controller charges
// it to that user's guest, which reports nothing of its own.
func TestAGuestThatHidesItsGPUProcessIsBoundedThroughItsJobCgroup(t *testing.T) {
	hiddenGuestIsBounded(t, true)
}

func TestAGuestThatHidesItsGPUProcessIsBoundedWithoutJobCgroups(t *testing.T) {
	hiddenGuestIsBounded(t, false)
}

func hiddenGuestIsBounded(t *testing.T, cgroups bool) {
	// What is judged is the memory bound: the host runs at full speed
	// beside the guest (no model, no pair; device time, so a loaded test
	// machine's CPU contention is no slowdown either), so introspection
	// keeps the guest at the default max_slowdown.
	e, fakeDir := startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4, Cgroups: cgroups}, oppYAML(0), "", jobEndAndOpp(t))
	// The hidden process outlives its job where nothing tracks it
	// (linuxproc): the test ends it, by the pid it wrote.
	pidFile := filepath.Join(e.work, "hidden.pid")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})

	host := e.sbatchAsTestUser(t, "-J", "host", "-o", filepath.Join(e.work, "host.out"), "--gres=shard:3",
		"--wrap", "exec "+e.synthCmd(fakeDir, "host", 60000, "-report 1s"))
	e.waitState(host, "RUNNING", 90*time.Second)
	e.eventually(90*time.Second, "the host's GPU use in its AdminComment", func() (bool, string) {
		c := e.show(host)["AdminComment"]
		return strings.Contains(c, "[GPU use: "), c
	})
	memFile := filepath.Join(e.work, "mem-hidden")
	hidden := fmt.Sprintf("setsid -f sh -c 'echo $$ >%s; exec %s'; exec sleep infinity", pidFile,
		e.synthCmd(fakeDir, "hidden", 4096, "-report 1s -fake-gpu-mem-file "+memFile))
	guest := e.sbatchAsTestUser(t, "-p", "opp", "-J", "hider", "-o", filepath.Join(e.work, "hider.out"), "--gres=shard:1", "--wrap", hidden)
	e.waitState(guest, "RUNNING", 90*time.Second)
	// The hidden process is running, and is not its step's.
	var pid int
	e.eventually(60*time.Second, "the hidden process to start", func() (bool, string) {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 1, string(b)
	})
	if ppid := parentOf(t, pid); ppid != 1 && ppid != 0 {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid)); strings.Contains(exe, "slurmstepd") {
			t.Fatalf("the hidden process %d is its step's child (parent %d, %s)", pid, ppid, exe)
		}
	}
	line := func(format string, a ...any) *regexp.Regexp {
		return regexp.MustCompile(regexp.QuoteMeta(fmt.Sprintf(format, a...)))
	}
	fits := line("job %d fits beside job %d on GPU GPU-fake-lnode1-0: its GPU memory 4096 MiB is within the room its neighbour leaves (13728 MiB)", guest, host)
	e.eventually(90*time.Second, "the hidden guest's memory judged within the room", func() (bool, string) {
		return fits.MatchString(e.c.ControllerLog()), e.c.ControllerLog()
	})
	if j := e.jobs()[guest]; j.State != "RUNNING" || e.restarts(guest) != 0 {
		t.Fatalf("the guest within the room: %+v, %d restarts", j, e.restarts(guest))
	}

	if err := os.WriteFile(memFile, []byte("20000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grew := time.Now()
	requeued := line("job %d requeued: its GPU memory 20000 MiB on GPU GPU-fake-lnode1-0 exceeds the room its neighbour job %d leaves (13728 MiB)", guest, host)
	e.eventually(90*time.Second, "the hidden guest requeued for its memory", func() (bool, string) {
		return requeued.MatchString(e.c.ControllerLog()) && e.restarts(guest) == 1, e.c.ControllerLog()
	})
	got := regexp.MustCompile(requeued.String() + `.*`).FindString(e.c.ControllerLog())
	t.Logf("%.1f s after the hidden process grew: %s", time.Since(grew).Seconds(), got)
	// Through the job cgroup it is its job's own memory; without, its
	// user's memory that no job accounts for, charged to it.
	charged := line("job %d charged 20000 MiB of GPU memory on GPU GPU-fake-lnode1-0 that its user's processes outside every job hold", guest)
	if noJob := charged.MatchString(e.c.ControllerLog()); noJob == cgroups {
		t.Fatalf("with job cgroups %v, the log says the memory was no job's: %v", cgroups, noJob)
	}
	if j := e.jobs()[host]; j.State != "RUNNING" || e.restarts(host) != 0 {
		t.Fatalf("the host: %+v, %d restarts; want it running, untouched", j, e.restarts(host))
	}
	e.cancel(guest)
	e.cancel(host)
}

// parentOf is process pid's parent (0 if it is gone).
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
