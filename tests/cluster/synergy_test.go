package cluster_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// profileOf is a stored profile whose best case is cpus CPUs and memGB GB
// per GPU.
func profileOf(model string, cpus int, memGB float64) profile.Record {
	return profile.Record{
		ID: "test-" + model, Model: model, Node: "lnode1", User: "root", GPUs: 1,
		Started: time.Now().Add(-time.Minute), Finished: time.Now(), Signal: "regex",
		Best: sensitivity.Demand{CPUsPerGPU: cpus, MemGBPerGPU: memGB}, Tolerance: 0.02,
	}
}

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
	if f["CpusPerTres"] != gresTRES("gpu:1") || f["MemPerTres"] != gresTRES("gpu:2000") {
		t.Fatalf("CpusPerTres=%s MemPerTres=%s; want the share, 1 CPU and 2000 MB per GPU", f["CpusPerTres"], f["MemPerTres"])
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
	if f["CpusPerTres"] != gresTRES("gpu:2") || !strings.Contains(out, "cpus=2") {
		t.Fatalf("explicit --cpus-per-gpu=2 became %s (job saw %q)", f["CpusPerTres"], out)
	}
	if err := e.c.WriteLachesisYAML(tiresiasYAML(e.dir, "synergy:\n  override: true\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	out, f = e.runAndRead("-J", "mystery", "--gpus=1", "--cpus-per-gpu=2")
	if f["CpusPerTres"] != gresTRES("gpu:1") || !strings.Contains(out, "cpus=1") {
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

// The example is model A at 3 CPUs per GPU and B at 1; this machine
// has 2 cores, and a job's CPUs must be real for the job to use them, so A
// needs 2 here.
func TestProfiledModelsGetTheirBestCase(t *testing.T) {
	e := startSeededCluster(t, synergyShape, "", []profile.Record{profileOf("A", 2, 1.5), profileOf("B", 1, 0.5)}, synergyConf...)
	outA, a := e.runAndRead("-J", "A", "--gpus=1")
	outB, b := e.runAndRead("-J", "B", "--gpus=1")
	if a["CpusPerTres"] != gresTRES("gpu:2") || a["MemPerTres"] != gresTRES("gpu:1536") || !strings.Contains(outA, "cpus=2") {
		t.Fatalf("A: CpusPerTres=%s MemPerTres=%s, job saw %q; want 2 CPUs, 1536 MB, 2 usable CPUs", a["CpusPerTres"], a["MemPerTres"], outA)
	}
	if b["CpusPerTres"] != gresTRES("gpu:1") || b["MemPerTres"] != gresTRES("gpu:512") || !strings.Contains(outB, "cpus=1") {
		t.Fatalf("B: CpusPerTres=%s MemPerTres=%s, job saw %q; want 1 CPU, 512 MB, 1 usable CPU", b["CpusPerTres"], b["MemPerTres"], outB)
	}
	if !strings.Contains(a["AdminComment"], "profile best case") {
		t.Fatalf("A's AdminComment %q does not explain the sizing", a["AdminComment"])
	}
	// The comment key beats the job name.
	_, c := e.runAndRead("-J", "train.sh", "--gpus=1", "--comment=model=A")
	if c["CpusPerTres"] != gresTRES("gpu:2") {
		t.Fatalf("--comment=model=A gave CpusPerTres=%s; want A's 2 CPUs", c["CpusPerTres"])
	}
}

func TestUnprofiledModelShowsUpInProfilerMissing(t *testing.T) {
	e := startSeededCluster(t, synergyShape, "", []profile.Record{profileOf("A", 2, 1.5)}, synergyConf...)
	e.runAndRead("-J", "never-profiled", "--gpus=1")
	e.runAndRead("-J", "A", "--gpus=1")
	bin := buildCommands(t)
	db := filepath.Join(e.dir, "lachesis", "lachesis.db")
	e.eventually(30*time.Second, "lachesis-profiler missing to list the model", func() (bool, string) {
		// One job of the model: below missing's default --min-jobs 2.
		out, err := exec.Command(filepath.Join(bin, "lachesis-profiler"), "missing", "--min-jobs", "1", "--db", db).CombinedOutput()
		return err == nil && strings.Contains(string(out), "never-profiled") && !strings.Contains(string(out), "\nA "), string(out)
	})
}

func TestFallbackShrinksAJobThatWouldWaitForever(t *testing.T) {
	e := startSeededCluster(t, synergyShape, "synergy:\n  fallback_after: 3\n", []profile.Record{profileOf("hungry", 2, 1)}, synergyConf...)
	// A job on the share takes 1 GPU and 1 of the 2 CPUs for a long time:
	// the hungry job's GPU is free, its second CPU never will be.
	filler := e.submit("-J", "filler", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(filler, "RUNNING", 30*time.Second)
	hungry := e.submit("-J", "hungry", "--gpus=1", "--wrap", "sleep 600")
	d, err := e.c.ShowJob(hungry)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fields["CpusPerTres"] != gresTRES("gpu:2") {
		t.Fatalf("hungry job sized %s; want its best case, 2 CPUs per GPU", d.Fields["CpusPerTres"])
	}
	e.waitState(hungry, "RUNNING", 40*time.Second)
	d, err = e.c.ShowJob(hungry)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fields["CpusPerTres"] != gresTRES("gpu:1") || !strings.Contains(d.Fields["AdminComment"], "resized to start now: 1 CPUs") ||
		!strings.Contains(d.Fields["AdminComment"], "its proportional share") {
		t.Fatalf("after the fallback: CpusPerTres=%s AdminComment=%q", d.Fields["CpusPerTres"], d.Fields["AdminComment"])
	}
}

// Start-time sizing: a job sized to its best case (6 CPUs per GPU) waits
// on a node whose last free GPU has 5 CPUs free, more than its share (2)
// but not its best case. The pass lowers it to the 5 the node spares, not
// to the share, and the AdminComment says why; then it starts.
func TestWaitingJobIsResizedToWhatTheNodeSparesNow(t *testing.T) {
	// 4 GPUs, 8 CPUs, 8000 MB: the share is 2 CPUs, 2000 MB per GPU.
	hw := shape{Nodes: 1, GPUs: 4, CPUs: 8, MemMB: 8000}
	e := startSeededCluster(t, hw, "synergy:\n  fallback_after: 3\n", []profile.Record{profileOf("hungry", 6, 1)}, "JobSubmitPlugins=synergy")
	// The filler asks for its own CPUs and memory (an explicit request is
	// kept): 3 GPUs, 1 CPU and 500 MB each, for a long time. Left free: 1
	// GPU, 5 CPUs, 6500 MB.
	filler := e.submit("-J", "filler", "--gpus=3", "--cpus-per-gpu=1", "--mem-per-gpu=500", "--wrap", "sleep 600")
	e.waitState(filler, "RUNNING", 30*time.Second)
	hungry := e.submit("-J", "hungry", "--gpus=1", "--wrap", "sleep 600")
	d, err := e.c.ShowJob(hungry)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fields["CpusPerTres"] != gresTRES("gpu:6") {
		t.Fatalf("hungry job sized %s; want its best case, 6 CPUs per GPU", d.Fields["CpusPerTres"])
	}
	e.waitState(hungry, "RUNNING", 60*time.Second)
	d, err = e.c.ShowJob(hungry)
	if err != nil {
		t.Fatal(err)
	}
	comment := d.Fields["AdminComment"]
	if d.Fields["CpusPerTres"] != gresTRES("gpu:5") || !strings.Contains(comment, "resized to start now: 5 CPUs") ||
		!strings.Contains(comment, "between its share and its sizing") {
		t.Fatalf("after start-time sizing: CpusPerTres=%s AdminComment=%q; want 5 CPUs per GPU and why", d.Fields["CpusPerTres"], comment)
	}
	if d.Fields["NumCPUs"] != "5" {
		t.Fatalf("hungry job runs on %s CPUs, want 5", d.Fields["NumCPUs"])
	}
}

// Start-time sizing waits for a job's request: a job sized to its best
// case (6 CPUs per GPU, at most half of the node's 16) that queued longer
// than fallback_after, and then finds a GPU free with only 4 CPUs beside
// it, is held back rather than lowered at once (the wait counts from the
// first pass that holds it back, not from submission). When a node frees
// its best case meanwhile, it starts with it.
func TestHeldBackJobStartsWithItsBestCaseWhenANodeFreesIt(t *testing.T) {
	// 4 GPUs, 16 CPUs, 16000 MB: the share is 4 CPUs, 4000 MB per GPU.
	hw := shape{Nodes: 1, GPUs: 4, CPUs: 16, MemMB: 16000}
	const fallbackAfter = 20 * time.Second
	e := startSeededCluster(t, hw, fmt.Sprintf("synergy:\n  fallback_after: %d\n", int(fallbackAfter.Seconds())),
		[]profile.Record{profileOf("hungry", 6, 1)}, "JobSubmitPlugins=synergy")
	// Explicit requests are kept: 3 GPUs with 4 CPUs each and 1 GPU with
	// 1 CPU leave no GPU and 3 CPUs free.
	wide := e.submit("-J", "wide", "--gpus=3", "--cpus-per-gpu=4", "--mem-per-gpu=500", "--wrap", "sleep 600")
	narrow := e.submit("-J", "narrow", "--gpus=1", "--cpus-per-gpu=1", "--mem-per-gpu=500", "--wrap", "sleep 600")
	e.waitState(wide, "RUNNING", 30*time.Second)
	e.waitState(narrow, "RUNNING", 30*time.Second)
	hungry := e.submit("-J", "hungry", "--gpus=1", "--wrap", "sleep 600")
	if d, err := e.c.ShowJob(hungry); err != nil || d.Fields["CpusPerTres"] != gresTRES("gpu:6") {
		t.Fatalf("hungry job sized %s (%v); want its best case, 6 CPUs per GPU", d.Fields["CpusPerTres"], err)
	}
	// Let it queue past fallback_after with no GPU free: the rule before
	// counted from submission and would lower it at the first pass that
	// finds a GPU free. (Waiting for time to pass is the condition here.)
	time.Sleep(fallbackAfter + 2*time.Second)
	if j := e.jobs()[hungry]; j.State != "PENDING" {
		t.Fatalf("hungry job %s before any GPU is free", j.State)
	}
	// A GPU frees with 4 CPUs beside it: the share, not the best case.
	if out, err := e.c.Run("scancel", fmt.Sprint(narrow)); err != nil {
		t.Fatalf("scancel: %v: %s", err, out)
	}
	e.waitState(narrow, "CANCELLED", 30*time.Second)
	e.waitPasses(3)
	d, err := e.c.ShowJob(hungry)
	if err != nil {
		t.Fatal(err)
	}
	if d.Fields["JobState"] != "PENDING" || d.Fields["CpusPerTres"] != gresTRES("gpu:6") || strings.Contains(d.Fields["AdminComment"], "resized") {
		t.Fatalf("held-back job: JobState=%s CpusPerTres=%s AdminComment=%q; want it pending at its best case",
			d.Fields["JobState"], d.Fields["CpusPerTres"], d.Fields["AdminComment"])
	}
	if !e.logMatches(fmt.Sprintf(`holding a waiting job back for its request.*job_id=%d`, hungry)) {
		t.Fatal("slurmctld's log does not say the job is held back")
	}
	// A node frees its best case within fallback_after: it starts with it.
	if out, err := e.c.Run("scancel", fmt.Sprint(wide)); err != nil {
		t.Fatalf("scancel: %v: %s", err, out)
	}
	e.waitState(hungry, "RUNNING", 60*time.Second)
	if d, err = e.c.ShowJob(hungry); err != nil {
		t.Fatal(err)
	}
	if d.Fields["CpusPerTres"] != gresTRES("gpu:6") || d.Fields["NumCPUs"] != "6" || strings.Contains(d.Fields["AdminComment"], "resized") {
		t.Fatalf("started: CpusPerTres=%s NumCPUs=%s AdminComment=%q; want its best case of 6 CPUs, never lowered",
			d.Fields["CpusPerTres"], d.Fields["NumCPUs"], d.Fields["AdminComment"])
	}
}

// A job lowered for its first run (as in the test above) and then requeued
// is raised back to its profile's best case before it starts again, once
// a node holds it: the raise takes its numbers from the profile, and the
// AdminComment says so.
func TestRequeuedLoweredJobIsRaisedToItsBestCase(t *testing.T) {
	hw := shape{Nodes: 1, GPUs: 4, CPUs: 8, MemMB: 8000}
	e := startSeededCluster(t, hw, "synergy:\n  fallback_after: 3\n", []profile.Record{profileOf("hungry", 6, 1)}, "JobSubmitPlugins=synergy")
	filler := e.submit("-J", "filler", "--gpus=3", "--cpus-per-gpu=1", "--mem-per-gpu=500", "--wrap", "sleep 600")
	e.waitState(filler, "RUNNING", 30*time.Second)
	hungry := e.submit("-J", "hungry", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(hungry, "RUNNING", 60*time.Second)
	if d, err := e.c.ShowJob(hungry); err != nil || d.Fields["CpusPerTres"] != gresTRES("gpu:5") {
		t.Fatalf("first run: CpusPerTres=%s (%v); want the lowered 5", d.Fields["CpusPerTres"], err)
	}
	// The filler ends and the lowered job is requeued: its best case is
	// free now.
	if out, err := e.c.Run("scancel", fmt.Sprint(filler)); err != nil {
		t.Fatalf("scancel: %v: %s", err, out)
	}
	if out, err := e.c.Run("scontrol", "requeue", fmt.Sprint(hungry)); err != nil {
		t.Fatalf("requeue: %v: %s", err, out)
	}
	e.eventually(60*time.Second, "the requeued job raised to its best case", func() (bool, string) {
		d, err := e.c.ShowJob(hungry)
		if err != nil {
			return false, err.Error()
		}
		return d.Fields["CpusPerTres"] == gresTRES("gpu:6") &&
			strings.Contains(d.Fields["AdminComment"], "raised to start now: 6 CPUs"), fmt.Sprintf("%v", d.Fields)
	})
}
