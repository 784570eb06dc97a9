package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The sleeper's last step is the fraction of a second the rest of the work
// takes at the job's speed: a job of 1 s of work at speed 4 stops at 1000
// thousandths done after a quarter second, where whole-second steps ran a
// full second and recorded 4000 (the replay's simulator runs it 0.25 s).
func TestTrainerStopsAtItsWork(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	cmd := exec.Command("bash", filepath.Join("..", "..", "..", "scripts", "demo-train.sh"), ckpt, "1", "1:4")
	cmd.Env = append(os.Environ(), "SLURM_JOB_CPUS_PER_NODE=1", "CUDA_VISIBLE_DEVICES=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got, err := os.ReadFile(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(got)); s != "1000" {
		t.Errorf("checkpoint %s thousandths, want 1000: the last step overran the work", s)
	}
}
