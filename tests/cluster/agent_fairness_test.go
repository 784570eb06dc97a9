package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// TestOneUserCannotBlockProfilingForEveryone replays issue 9's item 4 on the
// loopback cluster, through the CLI and the real root agent: user A asks
// for a sweep with --point-seconds 1e6 (refused by max_point_seconds), then
// floods the agent with long sweeps. User B's status still answers, B's
// own profile is queued with its place shown and runs once A gives up, and
// slurmctld keeps scheduling throughout.
func TestOneUserCannotBlockProfilingForEveryone(t *testing.T) {
	e := startAgentCluster(t)
	testenv.User(t, "lachesis-tb")
	// Both users' workloads write their datasets in the work directory.
	if err := os.Chmod(e.work, 0o1777); err != nil {
		t.Fatal(err)
	}
	synth := filepath.Join(e.bin, "lachesis-synth")
	workload := []string{"--", "/bin/sh", "-c", "exec " + synth + " -knee 1 -seconds 0 -data-mb 4"}
	profileArgs := func(model, pointSeconds string) []string {
		return append([]string{"profile", "--agent-socket", e.agentSock, "--model", model,
			"--point-seconds", pointSeconds, "--max-cpus", "1"}, workload...)
	}

	out, err := e.profilerCLI(testUser, profileArgs("a-forever", "1e6")...)
	if err == nil || !strings.Contains(out, "max_point_seconds") {
		t.Fatalf("--point-seconds 1e6 was not refused by max_point_seconds: %v\n%s", err, out)
	}

	// A's flood: long sweeps (300 s a point) from 8 CLI processes.
	ctx, cancelFlood := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	floodOut := make([]string, 8)
	for i := range floodOut {
		flood.Add(1)
		go func() {
			defer flood.Done()
			argv := append([]string{"runuser", "-u", testUser, "--", filepath.Join(e.bin, "lachesis-profiler")},
				profileArgs(fmt.Sprintf("a-long-%d", i), "300")...)
			cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
			cmd.Dir = e.work
			// Each CLI submits its own 1-CPU job (srun) to sweep in.
			cmd.Env = append(os.Environ(), "SLURM_CONF="+e.c.Conf)
			// Giving up terminates runuser and the srun under it (its own
			// process group), as a user's scancel or kill would: srun ends
			// the job's step, and the CLI in it hangs up on the agent. (A
			// SIGKILLed srun would leave the step running, as any srun.)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
			cmd.WaitDelay = 5 * time.Second
			b, _ := cmd.CombinedOutput()
			floodOut[i] = string(b)
		}()
	}
	stopFlood := func() { cancelFlood(); flood.Wait() }
	defer stopFlood()
	// B sees that a sweep runs, not which model A profiles.
	e.eventually(60*time.Second, "one of A's sweeps running", func() (bool, string) {
		out, err := e.profilerCLI("lachesis-tb", "status", "--agent-socket", e.agentSock)
		return err == nil && strings.Contains(out, "profiling now: another user's model"), out
	})
	if out, _ := e.profilerCLI("", "status", "--agent-socket", e.agentSock); !strings.Contains(out, "profiling now: a-long-") {
		t.Errorf("root's status does not name the model:\n%s", out)
	}

	// B is still served: status answers, and B's profile is queued with its
	// place shown while A's sweep runs.
	queued := func() (int, string) {
		out, err := e.profilerCLI("lachesis-tb", "status", "--agent-socket", e.agentSock)
		if err != nil {
			t.Fatalf("B's status failed during A's flood: %v\n%s", err, out)
		}
		n := 0
		if i := strings.Index(out, "queued: "); i >= 0 {
			fmt.Sscanf(out[i:], "queued: %d", &n)
		}
		return n, out
	}
	before, _ := queued()
	var bOut string
	var bErr error
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		bOut, bErr = e.profilerCLI("lachesis-tb", profileArgs("b-model", "2")...)
	}()
	e.eventually(60*time.Second, "B's profile queued behind A's running sweep", func() (bool, string) {
		n, out := queued()
		return n == before+1, out
	})

	// Jobs keep starting while the agent is busy.
	id := e.submit("-J", "during-flood", "--gpus=1", "--wrap", "sleep 1")
	e.waitState(id, "COMPLETED", 60*time.Second)

	// A gives up (its CLIs are killed): its sweeps end, B's runs and lands.
	stopFlood()
	select {
	case <-bDone:
	case <-time.After(4 * time.Minute):
		t.Fatal("B's profile never ran after A's sweeps ended")
	}
	if bErr != nil {
		t.Fatalf("B's profile failed: %v\n%s\nA's flood said:\n%s", bErr, bOut, strings.Join(floodOut, "\n---\n"))
	}
	if !strings.Contains(bOut, "place ") {
		t.Errorf("B was never shown its place in the queue:\n%s", bOut)
	}
	e.eventually(30*time.Second, "B's profile stored in the controller", func() (bool, string) {
		return e.profileCount("b-model") == 1, e.agentLogText()
	})
	refused := 0
	for _, o := range floodOut {
		if strings.Contains(o, "too many connections") {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("none of A's 8 concurrent requests was refused by the per-user connection cap:\n%s", strings.Join(floodOut, "\n---\n"))
	}
}
