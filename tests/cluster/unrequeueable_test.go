package cluster_test

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

// Issue 34 item 2: an opportunistic job that Slurm cannot requeue (the
// test user's `sbatch -p opp --no-requeue`) grows past the GPU memory its
// guaranteed neighbour leaves. The memory bound must take it off the GPU:
// scontrol requeue is refused (ESLURM_DISABLED), so it is cancelled, and
// slurmctld's log says why; it is never logged (nor counted) as requeued.
// The host runs on untouched. Before: every pass logged "requeued",
// counted it and asked Slurm again, and the guest stayed beside its host.
func TestAGuestSlurmCannotRequeueIsEndedWithItsReason(t *testing.T) {
	e, fakeDir := startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4, Cgroups: true}, oppYAML(0), "", jobEndAndOpp(t))
	synthCmd := func(name string, memMB int) string {
		return "exec " + e.synthCmd(fakeDir, name, memMB, "-knee 0.25 -workers 1 -report 1s -model "+name)
	}
	host := e.sbatchAsTestUser(t, "-J", "host", "--comment", "model=host", "-o", "/dev/null", "--gres=shard:3",
		"--wrap", synthCmd("host", 60000))
	e.waitState(host, "RUNNING", 90*time.Second)
	// 20000 MiB beside a host at 60000 of the fake GPU's 81920 (room 13728
	// MiB with the default 10% headroom): over the room.
	guest := e.sbatchAsTestUser(t, "-p", "opp", "--no-requeue", "-J", "guest", "--comment", "model=guest", "-o", "/dev/null",
		"--gres=shard:1", "--wrap", synthCmd("guest", 20000))
	e.waitState(guest, "RUNNING", 90*time.Second)
	ended := regexp.MustCompile(fmt.Sprintf(`job %d cancelled: it had to leave its GPU \(its GPU memory 20000 MiB on GPU \S+ exceeds the room its neighbour job %d leaves \(13728 MiB\)\) and Slurm cannot requeue it`, guest, host))
	e.eventually(180*time.Second, "the guest that cannot be requeued ended, with its reason", func() (bool, string) {
		st := e.show(guest)["JobState"]
		return ended.MatchString(e.c.ControllerLog()) && st == "CANCELLED", st + "\n" + e.c.ControllerLog()
	})
	t.Logf("%s", regexp.MustCompile(ended.String()+`.*`).FindString(e.c.ControllerLog()))
	if regexp.MustCompile(fmt.Sprintf(`job %d requeued`, guest)).MatchString(e.c.ControllerLog()) {
		t.Fatalf("a requeue Slurm refused is logged as done:\n%s", e.c.ControllerLog())
	}
	if j := e.jobs()[host]; j.State != "RUNNING" || e.restarts(host) != 0 {
		t.Fatalf("the host: %+v, %d restarts; want it running, untouched", j, e.restarts(host))
	}
}
