package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// guestRoom is a loopback cluster of one fake 81920 MiB GPU in four
// shards, whose test user runs a guaranteed host at 60000 MiB on three of
// them; a guest at 20000 MiB on the fourth is over the room the host
// leaves (13728 MiB with the default 10% headroom). The core's metrics
// are served at metrics.
type guestRoom struct {
	*agentEnv
	host    uint32
	metrics string
	fakeDir string
}

// startGuestRoom starts the cluster and its running host.
func startGuestRoom(t *testing.T) *guestRoom {
	g := &guestRoom{metrics: freeTCPAddr(t)}
	g.agentEnv, g.fakeDir = startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4, Cgroups: true},
		oppYAML(0)+"metrics:\n  listen: "+g.metrics+"\n", "", jobEndAndOpp(t))
	g.host = g.sbatchAsTestUser(t, "-J", "host", "--comment", "model=host", "-o", "/dev/null", "--gres=shard:3",
		"--wrap", g.guestCmd("host", 60000))
	g.waitState(g.host, "RUNNING", 90*time.Second)
	return g
}

// guestCmd is the shell command of a synthetic job named name (its model
// too) that holds memMB of the fake GPU's memory.
func (g *guestRoom) guestCmd(name string, memMB int) string {
	return "exec " + g.synthCmd(g.fakeDir, name, memMB, "-knee 0.25 -workers 1 -report 1s -model "+name)
}

// passes is how many scheduling passes the core has made (its pass
// histogram's count), -1 if the scrape does not say.
func (g *guestRoom) passes() float64 {
	m := regexp.MustCompile(`(?m)^lachesis_pass_duration_seconds_count(?:\{[^}]*\})? (\S+)$`).FindStringSubmatch(scrape(g.metrics))
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// endedUnrequeueable waits until the over-room guest is cancelled with the
// reason that Slurm cannot requeue it, then checks that nothing claims a
// requeue (log, lachesis_sharing_memory_requeues_total), that the cancel
// is not asked again pass after pass, and that the host ran on untouched.
func (g *guestRoom) endedUnrequeueable(t *testing.T, guest uint32) {
	t.Helper()
	ended := regexp.MustCompile(fmt.Sprintf(`job %d cancelled: it had to leave its GPU \(its GPU memory 20000 MiB on GPU \S+ exceeds the room its neighbour job %d leaves \(13728 MiB\)\) and Slurm cannot requeue it`, guest, g.host))
	g.eventually(180*time.Second, "the guest that cannot be requeued ended, with its reason", func() (bool, string) {
		st := g.show(guest)["JobState"]
		return ended.MatchString(g.c.ControllerLog()) && st == "CANCELLED", st + "\n" + g.c.ControllerLog()
	})
	t.Logf("%s", regexp.MustCompile(ended.String()+`.*`).FindString(g.c.ControllerLog()))
	// A few passes more: the ended guest is asked about no more.
	from := g.passes()
	g.eventually(120*time.Second, "three passes after the guest ended", func() (bool, string) {
		n := g.passes()
		return from >= 0 && n >= from+3, fmt.Sprintf("passes %v, then %v", from, n)
	})
	log := g.c.ControllerLog()
	if regexp.MustCompile(fmt.Sprintf(`job %d requeued`, guest)).MatchString(log) {
		t.Fatalf("a requeue Slurm refused is logged as done:\n%s", log)
	}
	if n := len(ended.FindAllString(log, -1)); n != 1 {
		t.Fatalf("the guest was ended %d times, want once:\n%s", n, log)
	}
	if regexp.MustCompile(fmt.Sprintf(`requeueing an opportunistic job failed.*job_id=%d\b`, guest)).MatchString(log) {
		t.Fatalf("the refused requeue is asked again pass after pass:\n%s", log)
	}
	text := scrape(g.metrics)
	for _, m := range regexp.MustCompile(`(?m)^lachesis_sharing_memory_requeues_total(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(text, -1) {
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || v != 0 {
			t.Fatalf("a requeue Slurm refused is counted: %s", m[0])
		}
	}
	if j := g.jobs()[g.host]; j.State != "RUNNING" || g.restarts(g.host) != 0 {
		t.Fatalf("the host: %+v, %d restarts; want it running, untouched", j, g.restarts(g.host))
	}
}

// Issue 34 item 2: an opportunistic job that Slurm cannot requeue (the
// test user's `sbatch -p opp --no-requeue`) grows past the GPU memory its
// guaranteed neighbour leaves. The memory bound must take it off the GPU:
// scontrol requeue is refused (ESLURM_DISABLED), so it is cancelled, and
// slurmctld's log says why; it is never logged (nor counted) as requeued.
// The host runs on untouched. Before: every pass logged "requeued",
// counted it and asked Slurm again, and the guest stayed beside its host.
func TestAGuestSlurmCannotRequeueIsEndedWithItsReason(t *testing.T) {
	g := startGuestRoom(t)
	guest := g.sbatchAsTestUser(t, "-p", "opp", "--no-requeue", "-J", "guest", "--comment", "model=guest", "-o", "/dev/null",
		"--gres=shard:1", "--wrap", g.guestCmd("guest", 20000))
	g.waitState(guest, "RUNNING", 90*time.Second)
	g.endedUnrequeueable(t, guest)
}

// Issue 34 item 2, the interactive case: the test user runs the guest
// with `srun -p opp --gres=shard:1 …` from a shell, as one would at a
// terminal, and it grows past the room its host leaves. An interactive
// job is no batch job: scontrol requeue is refused (ESLURM_BATCH_ONLY),
// so it is cancelled with its reason (srun returns), not counted as a
// requeue, and not asked about again; the host runs on untouched.
func TestAnInteractiveGuestIsEndedWithItsReason(t *testing.T) {
	g := startGuestRoom(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "runuser", "-u", testUser, "--", "srun", "-p", "opp", "--gres=shard:1",
		"-J", "guest", "--comment", "model=guest", "/bin/sh", "-c", g.guestCmd("guest", 20000))
	cmd.Dir = g.work
	cmd.Env = append(os.Environ(), "SLURM_CONF="+g.c.Conf)
	out, err := os.Create(filepath.Join(t.TempDir(), "srun.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srunDone := make(chan struct{})
	go func() { cmd.Wait(); close(srunDone) }()
	t.Cleanup(func() {
		cancel()
		<-srunDone
		g.c.Run("scancel", "-u", testUser, "-n", "guest")
	})
	var guest uint32
	g.eventually(90*time.Second, "the test user's srun guest running", func() (bool, string) {
		for id, j := range g.jobs() {
			if j.Name == "guest" && j.State == "RUNNING" {
				guest = id
				return true, ""
			}
		}
		b, _ := os.ReadFile(out.Name())
		return false, fmt.Sprintf("%+v\nsrun: %s", g.jobs(), b)
	})
	if f := g.show(guest); f["BatchFlag"] != "0" || f["Partition"] != "opp" {
		t.Fatalf("the guest is not an interactive opportunistic job: BatchFlag=%s Partition=%s", f["BatchFlag"], f["Partition"])
	}
	g.endedUnrequeueable(t, guest)
	select {
	case <-srunDone:
	case <-time.After(60 * time.Second):
		t.Fatal("srun still runs after its job was cancelled")
	}
	b, _ := os.ReadFile(out.Name())
	t.Logf("srun said: %s", b)
}
