package profiler

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// fakeJobCgroups makes job_<id> cgroups (and a step below them) in the v1
// cpuset and memory hierarchies, as Slurm's task/cgroup would, moves a
// sleeping "job process" into the step, and returns it. Root and v1 only.
func fakeJobCgroups(t *testing.T, id uint32, cpus []int) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	var step []string
	for _, ctl := range []string{"cpuset", "memory"} {
		var point string
		for _, m := range mounts {
			if !m.v2 && m.root == "/" && strings.Contains(","+strings.Join(m.opts, ",")+",", ","+ctl+",") {
				point = m.point
			}
		}
		if point == "" {
			t.Skipf("no v1 %s hierarchy here", ctl)
		}
		top := filepath.Join(point, fmt.Sprintf("lachesis-test-%d", os.Getpid()))
		job := filepath.Join(top, fmt.Sprintf("job_%d", id))
		dir := filepath.Join(job, "step_0")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Skipf("cannot make cgroups here: %v", err)
		}
		t.Cleanup(func() { removeCgroup(dir); removeCgroup(job); removeCgroup(top) })
		if ctl == "cpuset" {
			mems, _ := readTrim(filepath.Join(point, "cpuset.mems"))
			for _, d := range []string{top, job, dir} {
				if err := writeFile(filepath.Join(d, "cpuset.mems"), mems); err != nil {
					t.Fatal(err)
				}
				if err := writeFile(filepath.Join(d, "cpuset.cpus"), cpuList(cpus)); err != nil {
					t.Fatal(err)
				}
			}
		}
		step = append(step, dir)
	}
	proc := exec.Command("/bin/sleep", "60")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.Process.Kill(); proc.Wait() })
	for _, dir := range step {
		if err := writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(proc.Process.Pid)); err != nil {
			t.Fatal(err)
		}
	}
	return proc
}

// A workload started for a job runs on the job's CPUs only, in the job's
// memory cgroup (its limit holds) and in a cpuset cgroup below the job's
// own, never in one of the agent's; nothing is left behind.
func TestJobPinner_StartsTheWorkloadInsideTheJobsCgroups(t *testing.T) {
	all, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	jobCPUs := all[len(all)-1:]
	proc := fakeJobCgroups(t, 4242, jobCPUs)
	job := Job{ID: 4242, PID: proc.Process.Pid}
	cpus, err := allowedCPUsOf(job.PID)
	if err != nil {
		t.Fatal(err)
	}
	if cpuList(cpus) != cpuList(jobCPUs) {
		t.Fatalf("the job's CPUs read as %v, want %v", cpus, jobCPUs)
	}
	p, err := jobPinner(job, cpus)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mechanism: %s", p.Mechanism())
	var out bytes.Buffer
	cmd := exec.Command("/bin/cat", "/proc/self/status", "/proc/self/cgroup")
	cmd.Stdout = &out
	conf, err := p.Start(cmd, cpus[:1])
	if err != nil {
		t.Fatal(err)
	}
	waitErr := cmd.Wait()
	if err := conf.Release(); err != nil {
		t.Errorf("release: %v", err)
	}
	if waitErr != nil {
		t.Fatal(waitErr)
	}
	text := out.String()
	if got := statusField(text, "Cpus_allowed_list:"); got != cpuList(cpus[:1]) {
		t.Errorf("workload may run on %q, want %q", got, cpuList(cpus[:1]))
	}
	var sawCpuset, sawMemory bool
	for _, c := range procjob.ParseCgroups(text) {
		switch {
		case strings.Contains(strings.Join(c.Controllers, ","), "cpuset"):
			sawCpuset = strings.Contains(c.Path, "/job_4242/step_0/lachesis-profile-")
		case strings.Contains(strings.Join(c.Controllers, ","), "memory"):
			sawMemory = strings.HasSuffix(c.Path, "/job_4242/step_0")
		}
	}
	if !sawCpuset || !sawMemory {
		t.Errorf("workload's cgroups (cpuset below the job's: %v, the job's memory: %v):\n%s", sawCpuset, sawMemory, text)
	}
	// The agent's own threads are back where they were.
	self, _ := os.ReadFile("/proc/self/cgroup")
	if strings.Contains(string(self), "job_4242") {
		t.Errorf("the profiler is left in the job's cgroups:\n%s", self)
	}
}

// A process in no job cgroup (a node with proctrack/linuxproc) is pinned
// by affinity alone; one whose cgroups name another job gets none of them.
func TestJobPinner_OtherJobsCgroupsAreNotUsed(t *testing.T) {
	all, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	proc := fakeJobCgroups(t, 4343, all[:1])
	p, err := jobPinner(Job{ID: 4344, PID: proc.Process.Pid}, all[:1])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(affinityPinner); !ok {
		t.Fatalf("pinner for a job the process is not in: %s", p.Mechanism())
	}
}
