package cluster_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDownStopsAStepThatOutlivedItsSlurmd: a step whose processes would
// not die outlives slurmd (slurmd logs "STEPD TERMINATED ... DUE TO JOB NOT
// ENDING WITH SIGNALS", and the slurmstepd then waits on a slurmd that is
// gone: one stayed behind after a `make test`). It has no pid file, only
// slurmd's environment, so `cluster.sh down` finds it by its SLURM_CONF,
// and leaves alone one of another cluster.
func TestDownStopsAStepThatOutlivedItsSlurmd(t *testing.T) {
	e := startCluster(t, 1, "")
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	// A process named slurmstepd (comm), as a real one is named.
	stepd := filepath.Join(t.TempDir(), "slurmstepd")
	data, err := os.ReadFile(sleepBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stepd, data, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(conf string) *exec.Cmd {
		cmd := exec.Command(stepd, "600")
		cmd.Env = []string{"SLURM_CONF=" + conf}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	ours := start(e.c.Conf)
	theirs := start(e.c.Conf + ".another-cluster")
	defer func() {
		theirs.Process.Kill() //nolint:errcheck // test cleanup
		theirs.Wait()         //nolint:errcheck // reaped: no zombie slurmstepd for other clusters' down to wait on
	}()
	oursDone := make(chan error, 1)
	go func() { oursDone <- ours.Wait() }()

	if err := e.c.Down(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-oursDone:
	case <-time.After(30 * time.Second):
		ours.Process.Kill() //nolint:errcheck // test cleanup
		t.Fatal("down left the cluster's stray slurmstepd running")
	}
	if err := theirs.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("down stopped another cluster's slurmstepd: %v", err)
	}
}
