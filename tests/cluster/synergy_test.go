package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// synergyShape is one node with the machine's real 2 cores, so the CPUs a
// job is given are CPUs its processes can really use (task/affinity binds
// them), and 2 fake GPUs: the proportional share is 1 CPU and 2000 MB.
var synergyShape = shape{Nodes: 1, GPUs: 2, CPUs: 2, MemMB: 4000}

var synergyConf = []string{"JobSubmitPlugins=synergy", "TaskPlugin=task/affinity"}

// runAndRead submits a job that prints what the job sees, waits for it to
// finish, and returns its output and `scontrol show job` fields.
func (e *env) runAndRead(args ...string) (string, map[string]string) {
	e.t.Helper()
	out := filepath.Join(e.dir, fmt.Sprintf("out-%d", time.Now().UnixNano()))
	id := e.submit(append(args, "-o", out, "--wrap",
		`echo cpus=$(nproc); grep Cpus_allowed_list /proc/self/status`)...)
	d, err := e.c.ShowJob(id)
	if err != nil {
		e.t.Fatal(err)
	}
	e.waitState(id, "COMPLETED", 30*time.Second)
	b, err := os.ReadFile(out)
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b), d.Fields
}

func TestUnknownModelGetsTheProportionalShare(t *testing.T) {
	e := startShapedCluster(t, synergyShape, "", synergyConf...)
	out, f := e.runAndRead("-J", "mystery", "--gpus=1")
	if f["CpusPerTres"] != "gres:gpu:1" || f["MemPerTres"] != "gres:gpu:2000" {
		t.Fatalf("CpusPerTres=%s MemPerTres=%s; want the share gres:gpu:1 and gres:gpu:2000", f["CpusPerTres"], f["MemPerTres"])
	}
	if !strings.Contains(f["AdminComment"], "model=mystery") || !strings.Contains(f["AdminComment"], "no profile") {
		t.Fatalf("AdminComment %q does not explain the sizing", f["AdminComment"])
	}
	if !strings.Contains(out, "cpus=1") {
		t.Fatalf("job saw %q; want 1 usable CPU", out)
	}
}

func TestExplicitCPUsPerGPUWinsUnlessOverride(t *testing.T) {
	e := startShapedCluster(t, synergyShape, "", synergyConf...)
	out, f := e.runAndRead("-J", "mystery", "--gpus=1", "--cpus-per-gpu=2")
	if f["CpusPerTres"] != "gres:gpu:2" || !strings.Contains(out, "cpus=2") {
		t.Fatalf("explicit --cpus-per-gpu=2 became %s (job saw %q)", f["CpusPerTres"], out)
	}
	if err := e.c.WriteLachesisYAML(tiresiasYAML(e.dir, "synergy:\n  override: true\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	out, f = e.runAndRead("-J", "mystery", "--gpus=1", "--cpus-per-gpu=2")
	if f["CpusPerTres"] != "gres:gpu:1" || !strings.Contains(out, "cpus=1") {
		t.Fatalf("with override: CpusPerTres=%s (job saw %q); want the share, 1 CPU", f["CpusPerTres"], out)
	}
	if !strings.Contains(f["AdminComment"], "override") {
		t.Fatalf("AdminComment %q does not say the request was overridden", f["AdminComment"])
	}
}

func TestJobsWithoutGPUsAreLeftAlone(t *testing.T) {
	e := startShapedCluster(t, synergyShape, "", synergyConf...)
	_, f := e.runAndRead("-J", "cpu-only", "-c", "2")
	if f["CpusPerTres"] != "" || f["AdminComment"] != "" {
		t.Fatalf("a CPU-only job was touched: CpusPerTres=%q AdminComment=%q", f["CpusPerTres"], f["AdminComment"])
	}
}

func TestHugeCommentIsRefusedCleanly(t *testing.T) {
	e := startShapedCluster(t, synergyShape, "", synergyConf...)
	// The plugin reads at most the comment's first 4 KiB; Slurm itself
	// refuses comments over 1 KiB after the plugin has run.
	if _, err := e.c.Submit("-J", "named", "--gpus=1", "--comment="+strings.Repeat("x", 60000)+" model=hidden", "--wrap", "true"); err == nil {
		t.Fatal("a 60 kB comment was accepted")
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is not answering")
	}
	_, f := e.runAndRead("-J", "named", "--gpus=1", "--comment="+strings.Repeat("y", 900)+" model=real")
	if !strings.Contains(f["AdminComment"], "model=real") {
		t.Fatalf("AdminComment %q; want the model from the end of a 900-byte comment", f["AdminComment"])
	}
}
