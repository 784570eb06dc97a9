package cluster_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scrape returns the agent's /metrics text.
func scrape(addr string) string {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b)
}

// series finds the value of metric{labels} in a scrape, labels as
// Prometheus writes them (sorted by name).
func series(text, metric, labels string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric+"{"+labels+"}") + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// pidOf is the pid of the process whose command line is exactly argv
// (0 if none).
func pidOf(argv ...string) int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); bytes.Equal(b, want) && inOurRoot(e.Name()) {
			return pid
		}
	}
	return 0
}

// Issue 22 items 1 and 6 (agent side): two jobs of an ordinary user share
// the loopback cluster's one fake GPU through gres/shard, each running the
// synthetic training job on it; the node agent maps both jobs' processes
// to their jobs through the kernel and exports each job's use of the GPU
// on /metrics with sharers 2, and each job sees the other and slows down.
// Then the attack: the same ordinary user writes records into the fake
// device's directory naming a root process inside another job (the file's
// owner is not the process's) and a process of their own outside any job.
// Neither is attributed to a job: the first is not believed, the second is
// counted as outside any job.
func TestJobUsageOfTwoJobsSharingOneFakeGPU(t *testing.T) {
	metrics := freeTCPAddr(t)
	e, fakeDir := startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 8, Cgroups: true}, "",
		fmt.Sprintf("metrics:\n  listen: %q\n", metrics), nil)
	job := func(name string) uint32 {
		out, err := e.asTestUser("sbatch", "--parsable", "-J", name, "-D", e.work, "-o", filepath.Join(e.work, name+".out"),
			"--gres=shard:2", "--wrap", "exec "+e.synthCmd(fakeDir, name, 1024, "-knee 1 -shared-speed 0.7"))
		if err != nil {
			t.Fatalf("sbatch: %v\n%s", err, out)
		}
		id, err := strconv.ParseUint(strings.TrimSpace(strings.SplitN(out, ";", 2)[0]), 10, 32)
		if err != nil {
			t.Fatalf("sbatch said %q", out)
		}
		return uint32(id)
	}
	a, b := job("use_a"), job("use_b")
	e.waitState(a, "RUNNING", 90*time.Second)
	e.waitState(b, "RUNNING", 90*time.Second)
	// Cancelled before the cluster stops (an error is no matter then).
	t.Cleanup(func() { e.c.Run("scancel", strconv.Itoa(int(a)), strconv.Itoa(int(b))) })
	uuid := "GPU-fake-lnode1-0"
	labels := func(id uint32) string { return fmt.Sprintf(`gpu="0",hpc_job="%d",uuid=%q`, id, uuid) }
	var text string
	e.eventually(90*time.Second, "both jobs' usage of fake GPU 0 on /metrics, shared by 2", func() (bool, string) {
		text = scrape(metrics)
		for _, id := range []uint32{a, b} {
			s, _ := series(text, "lachesis_agent_job_gpu_sharers", labels(id))
			u, _ := series(text, "lachesis_agent_job_gpu_utilization_percent", labels(id))
			m, _ := series(text, "lachesis_agent_job_gpu_memory_used_bytes", labels(id))
			if s != 2 || !(u > 0) || m != 1<<30 {
				return false, text
			}
		}
		return true, ""
	})
	for _, name := range []string{"use_a", "use_b"} {
		e.eventually(30*time.Second, name+" slowing down beside the other", func() (bool, string) {
			out, _ := os.ReadFile(filepath.Join(e.work, name+".out"))
			return strings.Contains(string(out), "other process(es) on my fake GPUs [0]: speed 0.70"), string(out)
		})
	}

	// The attack. A root process inside a job of root's that never
	// touched the fake GPU…
	victim := e.submit("-J", "victim", "--gres=shard:1", "--wrap", "sleep 6007")
	e.waitState(victim, "RUNNING", 90*time.Second)
	t.Cleanup(func() { e.c.Run("scancel", strconv.Itoa(int(victim))) })
	var rootPID int
	e.eventually(30*time.Second, "the victim job's sleep", func() (bool, string) {
		rootPID = pidOf("sleep", "6007")
		return rootPID != 0, ""
	})
	// …and a process of the test user's own, outside any job.
	own := exec.Command("runuser", "-u", testUser, "--", "sleep", "6011")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.Process.Signal(syscall.SIGTERM); own.Wait() })
	var ownPID int
	e.eventually(30*time.Second, "the test user's own sleep", func() (bool, string) {
		ownPID = pidOf("sleep", "6011")
		return ownPID != 0, ""
	})
	write := func(name string, pid int) {
		rec := fmt.Sprintf(`{"pid":%d,"gpus":[0],"util_pct":99,"mem_mb":40000}`, pid)
		if out, err := e.asTestUser("sh", "-c", fmt.Sprintf("printf '%%s' '%s' > %s/%s", rec, fakeDir, name)); err != nil {
			t.Fatalf("the test user could not write a record: %v\n%s", err, out)
		}
	}
	write("forged.json", rootPID)
	write("outside.json", ownPID)
	// Both records are read in one sample: once the outside process is
	// counted, the forged record was judged too.
	e.eventually(30*time.Second, "the outside process counted", func() (bool, string) {
		text = scrape(metrics)
		outside, _ := series(text, "lachesis_agent_gpu_processes_outside_jobs", `reason="no_job"`)
		return outside == 1, text
	})
	if _, ok := series(text, "lachesis_agent_job_gpu_utilization_percent", labels(victim)); ok {
		t.Fatalf("a record naming root's process in job %d was attributed to that job:\n%s", victim, text)
	}
	if n, _ := series(text, "lachesis_agent_fake_gpu_records_ignored_total", `reason="not_owner"`); n < 1 {
		t.Fatalf("the forged record was not counted as not the process owner's:\n%s", text)
	}
	// The outside process's use is no job's, yet it shares the GPU: one
	// more sharer (the controller charges its memory to its user's
	// guests; TestAGuestThatHidesItsGPUProcessIsBoundedWithoutJobCgroups).
	// The forged record adds none.
	for _, id := range []uint32{a, b} {
		if s, _ := series(text, "lachesis_agent_job_gpu_sharers", labels(id)); s != 3 {
			t.Fatalf("job %d shares the GPU with %v after the attack, want 3 (two jobs and the outside process's use):\n%s", id, s, text)
		}
	}
	if !regexp.MustCompile(`(?m)^lachesis_agent_job_gpu_utilization_percent\{`).MatchString(text) ||
		strings.Count(text, "\nlachesis_agent_job_gpu_utilization_percent{") != 2 {
		t.Fatalf("want exactly the two jobs' utilisation series:\n%s", text)
	}
	// The agent's reports reach the controller (nothing refused), which
	// folds each job's use into its AdminComment: both jobs sharing the
	// GPU show their own summary, 1 GiB of GPU memory each.
	if n, _ := series(text, "lachesis_agent_delivery_failures_total", `kind="job_usage"`); n != 0 {
		t.Fatalf("%v usage reports failed to reach the controller:\n%s\nagent log:\n%s", n, text, e.agentLogText())
	}
	for _, id := range []uint32{a, b} {
		e.eventually(120*time.Second, fmt.Sprintf("job %d's GPU use in its AdminComment", id), func() (bool, string) {
			c := e.show(id)["AdminComment"]
			return strings.Contains(c, "[GPU use: mean ") && strings.Contains(c, "memory peak 1.0 GiB"), c
		})
	}
	if c := e.show(victim)["AdminComment"]; strings.Contains(c, "[GPU use:") {
		t.Fatalf("the victim job, whose only GPU record was forged, shows GPU use: %s", c)
	}
}
