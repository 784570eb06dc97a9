package cluster_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// asTestUser runs a Slurm client command of this cluster as the test user.
func (e *agentEnv) asTestUser(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", testUser, "--"}, args...)...)
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.c.Conf)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// sbatchAsTestUser submits a batch job as the test user from e.work
// (`sbatch --parsable -D e.work args...`), fails t if Slurm refuses it,
// and cancels it when t ends.
func (e *agentEnv) sbatchAsTestUser(t *testing.T, args ...string) uint32 {
	t.Helper()
	out, err := e.asTestUser(append([]string{"sbatch", "--parsable", "-D", e.work}, args...)...)
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(strings.SplitN(out, ";", 2)[0]), 10, 32)
	if err != nil {
		t.Fatalf("sbatch said %q", out)
	}
	t.Cleanup(func() { e.c.Run("scancel", strconv.Itoa(int(id))) })
	return uint32(id)
}

// Issue 20 item 1: the sweep runs inside a Slurm job of the user who asked
// (submitted by the CLI itself with srun), in that job's cgroups: its
// memory cgroup (whose limit holds) and a cpuset below the job's own; the
// job is the user's, named lachesis-profile, and Slurm accounts it.
func TestProfilingRunsInsideTheCallersJob(t *testing.T) {
	e := startAgentCluster(t)
	synth := filepath.Join(e.bin, "lachesis-synth")
	script := `cat /proc/self/cgroup >> cgroups; exec ` + synth + ` -knee 1 -seconds 0 -data-mb 4`
	out, err := e.profilerCLI(testUser, "profile", "--agent-socket", e.agentSock, "--model", "in-a-job",
		"--point-seconds", "2", "--max-cpus", "2", "--srun-args", "--mem=500", "--", "/bin/sh", "-c", script)
	if err != nil {
		t.Fatalf("lachesis-profiler profile: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(e.work, "cgroups"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	memory := regexp.MustCompile(`(?m)^\d+:memory:/slurm_lnode1/uid_\d+/job_(\d+)/`).FindStringSubmatch(text)
	if memory == nil {
		t.Fatalf("the workload ran outside any job's memory cgroup:\n%s", text)
	}
	job := memory[1]
	if !regexp.MustCompile(`(?m)^\d+:cpuset:/slurm_lnode1/uid_\d+/job_` + job + `/.*lachesis-profile-`).MatchString(text) {
		t.Fatalf("the workload's cpuset is not below job %s's:\n%s", job, text)
	}
	if strings.Contains(text, ":/lachesis-profile-") {
		t.Fatalf("a point's cgroup at the root of a hierarchy:\n%s", text)
	}
	e.eventually(30*time.Second, "the profiling job in the job completion log", func() (bool, string) {
		log, _ := os.ReadFile(filepath.Join(e.dir, "log", "jobcomp.log"))
		ok := regexp.MustCompile(`JobId=` + job + ` UserId=` + testUser + `\(\d+\).* Name=lachesis-profile `).Match(log)
		return ok, string(log)
	})
}

// Issue 20 item 1, the attack: a user asks the agent directly, claiming a
// job (SLURM_JOB_ID) they are not inside: first one that does not exist,
// then their own running job, called from outside it. Both are refused
// with the message that says how to profile, the workload never runs, and
// the agent's log says why.
func TestProfileFromOutsideAJobIsRefused(t *testing.T) {
	e := startAgentCluster(t)
	out, err := e.asTestUser("sbatch", "--parsable", "-N1", "-n1", "--wrap", "sleep 300")
	if err != nil {
		t.Fatalf("sbatch: %v\n%s", err, out)
	}
	id, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("sbatch said %q", out)
	}
	e.waitState(uint32(id), "RUNNING", 60*time.Second)

	synth := filepath.Join(e.bin, "lachesis-synth")
	script := `echo ran >> ran; exec ` + synth + ` -knee 1 -seconds 0 -data-mb 4`
	for _, claim := range []string{"1", strconv.Itoa(id)} {
		out, err := e.asTestUser("env", "SLURM_JOB_ID="+claim, filepath.Join(e.bin, "lachesis-profiler"), "profile",
			"--agent-socket", e.agentSock, "--model", "outside-"+claim, "--point-seconds", "2", "--max-cpus", "1",
			"--", "/bin/sh", "-c", script)
		if err == nil || !strings.Contains(out, "profiling runs inside a Slurm job of yours on this node") ||
			!strings.Contains(out, "srun") {
			t.Fatalf("claiming job %s from outside it: %v\n%s", claim, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(e.work, "ran")); err == nil {
		t.Fatal("the workload ran for a refused request")
	}
	if n := strings.Count(e.agentLogText(), "profile request refused: not from a job"); n != 2 {
		t.Fatalf("the agent logged %d refusals, want 2:\n%s", n, e.agentLogText())
	}
	if e.profileCount("outside-1")+e.profileCount("outside-"+strconv.Itoa(id)) != 0 {
		t.Fatal("a refused request left a profile")
	}
}

// asUser runs a command of this cluster as user name.
func (e *agentEnv) asUser(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", name, "--"}, args...)...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.c.Conf)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// heldJobComment submits a held 1-GPU job named model as user and returns
// the AdminComment Synergy's sizing left on it.
func (e *agentEnv) heldJobComment(user, model string) string {
	e.t.Helper()
	out, err := e.asUser(user, "sbatch", "--parsable", "-H", "-J", model, "--gpus=1", "-o", "/dev/null", "--wrap", "true")
	if err != nil {
		e.t.Fatalf("sbatch as %s: %v\n%s", user, err, out)
	}
	id, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		e.t.Fatalf("sbatch said %q", out)
	}
	return e.show(uint32(id))["AdminComment"]
}

// Issue 20 item 2, the attack: a user profiles a model with a workload
// that makes it look like it needs 1 CPU. Their profile sizes their own
// jobs of that model only; another user's job of the same name gets the
// proportional share. Publishing it for everyone is refused to an ordinary
// user; root's publication makes it size the other user's jobs too.
func TestAUsersProfileSizesOnlyTheirOwnJobs(t *testing.T) {
	e := startAgentCluster(t)
	testenv.User(t, "lachesis-tb")
	otherName := "lachesis-tb"
	e.profile("owned-bert")
	const profiled = "model=owned-bert profile best case"
	const share = "model=owned-bert proportional share (no profile yet)"
	if c := e.heldJobComment(testUser, "owned-bert"); !strings.Contains(c, profiled) {
		t.Fatalf("the profiling user's own job: AdminComment %q, want %q", c, profiled)
	}
	if c := e.heldJobComment(otherName, "owned-bert"); !strings.Contains(c, share) {
		t.Fatalf("another user's job was sized by the first user's profile: AdminComment %q", c)
	}

	db := filepath.Join(e.dir, "lachesis", "lachesis.db")
	profiler := filepath.Join(e.bin, "lachesis-profiler")
	out, err := e.asTestUser(profiler, "publish", "owned-bert", "--user", testUser, "--db", db)
	if err == nil || !strings.Contains(out, "for root or SlurmUser") {
		t.Fatalf("an ordinary user published a profile: %v\n%s", err, out)
	}
	if c := e.heldJobComment(otherName, "owned-bert"); !strings.Contains(c, share) {
		t.Fatalf("after the refused publication, another user's job: AdminComment %q", c)
	}
	cmd := exec.Command(profiler, "publish", "owned-bert", "--user", testUser, "--db", db)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "published profile") {
		t.Fatalf("root's publish: %v\n%s", err, out)
	}
	e.eventually(60*time.Second, "the published profile sizing another user's job", func() (bool, string) {
		c := e.heldJobComment(otherName, "owned-bert")
		return strings.Contains(c, profiled), c
	})
}

// The sweep ends with its job: when the user cancels the profiling job,
// the workload is gone at once (Slurm kills it in the job's cgroups, the
// agent stops the sweep) and nothing of it survives on the node.
func TestSweepEndsWhenItsJobIsCancelled(t *testing.T) {
	e := startAgentCluster(t)
	synth := filepath.Join(e.bin, "lachesis-synth")
	done := make(chan string, 1)
	go func() {
		out, _ := e.profilerCLI(testUser, "profile", "--agent-socket", e.agentSock, "--model", "cancelled",
			"--point-seconds", "120", "--max-cpus", "1", "--", synth, "-knee", "1", "-seconds", "0", "-data-mb", "4")
		done <- out
	}()
	var job string
	e.eventually(60*time.Second, "the sweep to start", func() (bool, string) {
		m := regexp.MustCompile(`msg=profiling .*model=cancelled .*job=(\d+)`).FindStringSubmatch(e.agentLogText())
		if m != nil {
			job = m[1]
		}
		return m != nil, e.agentLogText()
	})
	u := testenv.EnsureUser(t, testUser)
	workload := func() string {
		out, _ := exec.Command("pgrep", "-u", u.Uid, "-f", "lachesis-synth").Output()
		return strings.TrimSpace(string(out))
	}
	// Other tests profile as the same user at the same time: this sweep's
	// workload is the user's lachesis-synth processes in this job's cgroups.
	inJob := func() []string {
		var pids []string
		for _, pid := range strings.Fields(workload()) {
			cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
			if err == nil && strings.Contains(string(cg), "/job_"+job+"/") {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	var pids []string
	e.eventually(30*time.Second, "the workload running in the job", func() (bool, string) {
		pids = inJob()
		return len(pids) > 0, workload()
	})
	if out, err := e.asTestUser("scancel", job); err != nil {
		t.Fatalf("scancel %s: %v\n%s", job, err, out)
	}
	e.eventually(30*time.Second, "the workload gone", func() (bool, string) {
		var alive []string
		for _, pid := range pids {
			if _, err := os.Stat("/proc/" + pid); err == nil {
				alive = append(alive, pid)
			}
		}
		return len(alive) == 0, "still running: " + strings.Join(alive, " ")
	})
	select {
	case out := <-done:
		if strings.Contains(out, "delivered to the controller") {
			t.Fatalf("a cancelled sweep made a profile:\n%s", out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the CLI outlived its cancelled job")
	}
	e.eventually(30*time.Second, "the agent to end the run", func() (bool, string) {
		return regexp.MustCompile(`profiling failed.*model=cancelled`).MatchString(e.agentLogText()), e.agentLogText()
	})
	if n := e.profileCount("cancelled"); n != 0 {
		t.Fatalf("%d profiles of a cancelled sweep", n)
	}
}
