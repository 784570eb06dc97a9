package cluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 34 item 6: the test user keeps 1,100 opportunistic jobs of
// distinct model keys waiting (`sbatch -p opp --begin=now+1hour`), more
// than the 1,024 waiting guests and 64 models a pass judges. Another
// user's (root's) waiting guest of a model Gavel predicts at 0.52 of alone
// beside the running host is still judged: kept off the host's node.
// Before: the flood, submitted first, took every slot and the guest was
// never judged, so it would have landed beside the host.
func TestAFloodOfWaitingGuestsLeavesAnotherUsersGuestSteered(t *testing.T) {
	gavel := filepath.Join(repoRoot, "data", "gavel")
	e, fakeDir := startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, ShardsPerGPU: 4, Cgroups: true},
		oppYAML(0)+"  pair_table: "+gavel+"\n", "", jobEndAndOpp(t))
	host := e.sbatchAsTestUser(t, "-J", "host", "--comment", "model=ResNet-18/bs64", "-o", "/dev/null", "--gres=shard:3",
		"--wrap", "exec "+e.synthCmd(fakeDir, "host", 512, "-knee 0.25 -workers 1 -report 1s -model ResNet-18/bs64"))
	e.waitState(host, "RUNNING", 90*time.Second)

	// The flood: one shell of the test user's submitting 1,100 jobs.
	const flood = 1100
	t.Cleanup(func() { e.c.Run("scancel", "-u", testUser) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	script := fmt.Sprintf(`seq 1 %d | xargs -P 4 -I{} sbatch -Q -D %s -o /dev/null -p opp --begin=now+3600 --gres=shard:1 -J flood{} --comment=model=flood-{} --wrap true`, flood, e.work)
	cmd := exec.CommandContext(ctx, "runuser", "-u", testUser, "--", "bash", "-c", script)
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.c.Conf)
	started := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the flood: %v\n%s", err, out)
	}
	t.Logf("%d jobs submitted by the test user in %.1f s", flood, time.Since(started).Seconds())

	guest := e.submit("-p", "opp", "--begin=now+3600", "-J", "other", "--comment", "model=ResNet-50/bs64", "-o", "/dev/null",
		"--gres=shard:1", "--wrap", "true")
	e.eventually(180*time.Second, "another user's guest kept off the host's node beside the flood", func() (bool, string) {
		f := e.show(guest)
		return f["ExcNodeList"] == "lnode1", fmt.Sprintf("ExcNodeList %q", f["ExcNodeList"])
	})
	if !strings.Contains(e.c.ControllerLog(), fmt.Sprintf("job %d kept off node lnode1: beside job %d (model resnet-18/bs64)", guest, host)) {
		t.Fatalf("the log does not say why the guest is kept off lnode1:\n%s", e.c.ControllerLog())
	}
}
