package procjob

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The rule on facts alone: which job a request and a GPU process are in.
func TestTheRuleOnFacts(t *testing.T) {
	errCg := errors.New("gone")
	for _, tc := range []struct {
		name       string
		p          Process
		requestJob uint32
		requestErr bool
		gpuJob     uint32
		gpuWhy     string
	}{
		{"step alone: its job", Process{StepJob: 5}, 5, false, 5, ""},
		{"step and agreeing cgroups: its job", Process{StepJob: 5, CgroupJobs: []uint32{5}}, 5, false, 5, ""},
		{"no step: no job, whatever the cgroups say", Process{CgroupJobs: []uint32{5}}, 0, true, 0, NoJob},
		{"cgroups naming another job: no job", Process{StepJob: 5, CgroupJobs: []uint32{6}}, 0, true, 0, NoJob},
		{"cgroups naming two jobs: a request's job, no GPU job", Process{StepJob: 5, CgroupJobs: []uint32{6, 5}}, 5, false, 0, NoJob},
		{"cgroups unreadable: a request's job, a GPU process gone", Process{StepJob: 5, CgroupErr: errCg}, 5, false, 0, Gone},
		{"root's job cgroup, no step (left its step's tree): a GPU process in its job", Process{CgroupJobs: []uint32{5}, CgroupJob: 5}, 0, true, 5, ""},
		{"root's job cgroup and a user's inside it: its job", Process{StepJob: 5, CgroupJobs: []uint32{5, 9}, CgroupJob: 5}, 5, false, 5, ""},
		{"root's job cgroups of two jobs: no job", Process{StepJob: 5, CgroupJobs: []uint32{5, 6}, CgroupsSplit: true}, 5, false, 0, NoJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := tc.p.RequestJob()
			if job != tc.requestJob || (err != nil) != tc.requestErr {
				t.Errorf("RequestJob: got %d, %v", job, err)
			}
			if job, why := tc.p.GPUJob(); job != tc.gpuJob || why != tc.gpuWhy {
				t.Errorf("GPUJob: got %d, %q", job, why)
			}
		})
	}
	_, err := Process{StepJob: 5, CgroupJobs: []uint32{6}}.RequestJob()
	if err == nil || err.Error() != "its step says job 5, its cgroups [6]" {
		t.Fatalf("the disagreement reads %v", err)
	}
	if _, err := (Process{}).RequestJob(); !errors.Is(err, ErrNoStep) {
		t.Fatalf("no step: got %v", err)
	}
}

func TestGPUProcessJobPutsAProcessOutsideSlurmInNoJob(t *testing.T) {
	// The test binary runs under no slurmstepd.
	if job, uid, why := GPUProcessJob(os.Getpid()); job != 0 || why != NoJob || uid != uint32(os.Getuid()) {
		t.Fatalf("got job %d uid %d %q, want no job", job, uid, why)
	}
	if _, _, why := GPUProcessJob(1 << 30); why != Gone {
		t.Fatalf("a pid that does not exist: %q, want gone", why)
	}
	if _, err := Read(1 << 30); !errors.Is(err, ErrGone) {
		t.Fatalf("Read of a pid that does not exist: %v", err)
	}
}

// A process that has exited and not yet been reaped (a killed job's
// process between its death and its reaping, when its slurmstepd and its
// job cgroup may be gone already) is gone: neither a job's nor use of
// no job, and the fake device does not believe its record.
func TestAZombieIsGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Wait() })
	// Not waited for: it stays a zombie once it exits.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := ReadStatus(pid)
		if err != nil {
			t.Fatalf("the unreaped child %d: %v", pid, err)
		}
		if st.Exited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d not a zombie after 10 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if job, _, why := GPUProcessJob(pid); job != 0 || why != Gone {
		t.Fatalf("a zombie: job %d %q, want gone", job, why)
	}
	if _, err := Read(pid); !errors.Is(err, ErrGone) {
		t.Fatalf("Read of a zombie: %v", err)
	}
	if uid, alive := Owner(pid); alive {
		t.Fatalf("Owner of a zombie: uid %d, alive", uid)
	}
}

// A process whose main thread exited (pthread_exit) while another thread
// runs shows as a zombie in /proc/<pid>/status, yet is alive and may hold
// a GPU: hiding a GPU process that way must not make it gone.
func TestAProcessWhoseMainThreadExitedIsNotGone(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler to build the program")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "leader.c")
	if err := os.WriteFile(src, []byte(`#include <pthread.h>
#include <unistd.h>
static void *run(void *a) { (void)a; sleep(30); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_exit(0); }
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "leader")
	if out, err := exec.Command(cc, "-o", bin, src, "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v: %s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(procPath(pid, "status"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "State:\tZ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the main thread of %d did not exit in 10 s", pid)
		}
	}
	if _, _, why := GPUProcessJob(pid); why != NoJob {
		t.Fatalf("a live process with a zombie main thread: %q, want %q (judged by the rule)", why, NoJob)
	}
	if _, alive := Owner(pid); !alive {
		t.Fatal("Owner: a live process with a zombie main thread is not alive")
	}
}

// startUnder runs `sleep 30` as the child of a shell started from the
// binary exe with argv[0] title, and returns the shell's and the sleep's
// pids.
func startUnder(t *testing.T, exe, title string) (shell, child int) {
	t.Helper()
	cmd := exec.Command(exe, "-c", "sleep 30 & echo $!; wait")
	cmd.Args[0] = title
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if child > 0 {
			if p, err := os.FindProcess(child); err == nil {
				p.Kill()
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	child, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the shell said %q", line)
	}
	// $! is known before the forked shell has exec'd sleep: until then
	// the child is a copy of the shell, title and all.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(procPath(child, "cmdline")); err == nil && strings.HasPrefix(string(b), "sleep\x00") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d did not exec sleep in 10 s", child)
		}
	}
	return cmd.Process.Pid, child
}

// A process that only calls itself a slurmstepd, title and all, is not in
// a job: the binary must be Slurm's.
func TestATitleIsNotAStep(t *testing.T) {
	shell, child := startUnder(t, "/bin/sh", "slurmstepd: [77.0]")
	for _, pid := range []int{os.Getpid(), shell, child} {
		p, err := Read(pid)
		if err != nil || p.StepJob != 0 || p.StepPID != 0 {
			t.Fatalf("pid %d: got %+v, %v; want no step", pid, p, err)
		}
	}
}

// A root process running a binary named slurmstepd, with a step's title,
// is the step of its descendants: the walk, the title and the rule end to
// end on /proc, with a copy of sh standing in for Slurm's binary.
func TestAProcessUnderARootStepdIsInItsJob(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: a step daemon runs as root, and this test plays one")
	}
	exe := filepath.Join(t.TempDir(), "slurmstepd")
	b, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	shell, child := startUnder(t, exe, "slurmstepd: [77.0]")
	p, err := Read(child)
	if err != nil || p.StepJob != 77 || p.StepPID != shell || p.UID != 0 {
		t.Fatalf("got %+v, %v; want job 77 under stepd %d", p, err, shell)
	}
	if job, err := p.RequestJob(); job != 77 || err != nil {
		t.Fatalf("RequestJob: %d, %v", job, err)
	}
	if job, uid, why := GPUProcessJob(child); job != 77 || uid != 0 || why != "" {
		t.Fatalf("GPUProcessJob: %d, %d, %q", job, uid, why)
	}
	// The same binary with a title that names no step is not one.
	_, other := startUnder(t, exe, "slurmstepd: [x.0]")
	if job, _, why := GPUProcessJob(other); job != 0 || why != NoJob {
		t.Fatalf("a bad title: %d, %q", job, why)
	}
}

// A job_<id> cgroup is not enough to claim a job: where cgroup v2 is
// delegated, a user can make one and move into it, and it is theirs. A
// process in such a cgroup (played by one chowned to nobody) with no root
// slurmstepd above it is in no job; in one root owns (Slurm's), it is in
// that job, step or none: the daemonised GPU process of a job is still
// its job's.
func TestGPUProcessJobBelievesOnlyRootsJobCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	root := "/sys/fs/cgroup/freezer"
	id := 900000 + os.Getpid()%90000
	cg := filepath.Join(root, fmt.Sprintf("job_%d", id))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("no cgroup v1 freezer hierarchy to test in: %v", err)
	}
	defer os.Remove(cg)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0)
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Skipf("cannot move a process into a cgroup here: %v", err)
	}
	if p, _ := Read(cmd.Process.Pid); len(p.CgroupJobs) != 1 || p.CgroupJob != uint32(id) {
		t.Fatalf("the process's cgroups: %+v, want job %d, root's", p, id)
	}
	if job, _, why := GPUProcessJob(cmd.Process.Pid); job != uint32(id) || why != "" {
		t.Fatalf("root's job cgroup gave job %d (%q), want %d", job, why, id)
	}
	if err := os.Chown(cg, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if p, _ := Read(cmd.Process.Pid); len(p.CgroupJobs) != 1 || p.CgroupJob != 0 {
		t.Fatalf("the process's cgroups: %+v, want the forged one, not believed", p)
	}
	if job, _, why := GPUProcessJob(cmd.Process.Pid); job != 0 || why != NoJob {
		t.Fatalf("a forged job cgroup gave job %d (%q), want no job", job, why)
	}
}

// BenchmarkGPUProcessJob is the look-up the agent makes for every GPU
// process every interval: /proc reads up its ancestors and its cgroups.
func BenchmarkGPUProcessJob(b *testing.B) {
	pid := os.Getpid()
	for b.Loop() {
		GPUProcessJob(pid)
	}
}
