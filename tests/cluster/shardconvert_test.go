package cluster_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// Whole GPUs into shards (issue 22 item 3): an ordinary user runs two
// one-GPU jobs of model "light" whose (fake) GPU use peaks near 20%, and
// two of model "heavy" near 90%, measured by the node agent. Their next
// `sbatch --gpus=1` of light is rewritten by job_submit/synergy into
// gres/shard:2 of the GPU's 4, the AdminComment and slurmctld's log say
// why with the measured figures, and an opportunistic job then starts on
// the other half of the same GPU beside it. Not rewritten: their job of
// heavy, their job of light with --comment=whole_gpu, and another user's
// (root's) job of light, whose history is empty (the attack: a user's
// idle jobs must never change how another user's jobs are allocated).
// Before the rewrite, the guaranteed job held the whole GPU and the guest
// waited. A guaranteed job's own request for the spare shards is refused
// at submit (issue 34 item 5). gres.conf names the GPU's cores, so the node's Gres as
// slurmctld holds it carries a socket suffix ("gpu:1(S:0)"), which the
// rewrite reads like any node string.
func TestQuietOneGPUJobOfAModelGetsShardsAndAGuestBeside(t *testing.T) {
	conf := func(string) []string { return []string{oppPartition, "JobSubmitPlugins=synergy"} }
	yaml := oppYAML(0) + "  convert_below_pct: 50\n  convert_min_jobs: 2\n"
	e, fakeDir := startFakeGPUCluster(t, shape{Nodes: 1, GPUs: 1, CPUs: 8, MemMB: 16000, ShardsPerGPU: 4, Cgroups: true, GresCores: true}, yaml, "", conf)
	if out, err := e.c.Run("scontrol", "-o", "show", "node", "lnode1"); err != nil || !regexp.MustCompile(`Gres=gpu:1\(S:0\)`).MatchString(out) {
		t.Fatalf("the node's Gres has no socket suffix: %v\n%s", err, out)
	}
	u := testenv.EnsureUser(t, testUser)
	uid, _ := strconv.Atoi(u.Uid)
	synth := filepath.Join(e.bin, "lachesis-synth")
	sbatch := func(args ...string) uint32 {
		t.Helper()
		return e.sbatchAsTestUser(t, append([]string{"-o", "/dev/null"}, args...)...)
	}
	// A measured job: the synthetic training job driving its fake GPU at
	// util percent for about 8 s (the agent samples every second).
	measured := func(name, model string, util float64) uint32 {
		j := demo.Job{Name: name, Work: 8 * time.Second, UtilPct: util}
		return sbatch("-J", name, "--comment", "model="+model, "--gpus=1",
			"--wrap", demo.SynthCommand(j, synth, fakeDir, e.work, filepath.Join(e.work, name+".ckpt")))
	}
	// The history as the ledger keeps it (saved after each pass).
	joined := func(id uint32, model string) {
		e.eventually(120*time.Second, fmt.Sprintf("job %d's GPU use in its user's history", id), func() (bool, string) {
			store, err := ledger.OpenReadOnly(filepath.Join(e.dir, "lachesis", "lachesis.db"))
			if err != nil {
				return false, err.Error()
			}
			defer store.Close()
			rows, err := store.ModelJobUses()
			for _, r := range rows {
				if r.JobID == id && r.User == uint32(uid) && r.Model == model {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v %v; job: %s %s", rows, err, e.show(id)["JobState"], e.show(id)["AdminComment"])
		})
	}
	for i, m := range []struct {
		model string
		util  float64
	}{{"light", 20}, {"light", 20}, {"heavy", 90}, {"heavy", 90}} {
		id := measured(fmt.Sprintf("%s%d", m.model, i), m.model, m.util)
		if tres := e.show(id)["TresPerJob"]; !strings.Contains(tres, "gpu:1") {
			t.Fatalf("job %d of %s before its history: TresPerJob=%q, want its whole GPU", id, m.model, tres)
		}
		joined(id, m.model)
	}

	// The rewrite.
	host := sbatch("-J", "host", "--comment", "model=light", "--gpus=1", "--wrap", "sleep 600")
	f := e.show(host)
	if f["TresPerNode"] != gresTRES("shard:2") || strings.Contains(f["TresPerJob"], "gpu") {
		t.Fatalf("the quiet model's job: TresPerNode=%q TresPerJob=%q; want 2 shards and no GPU", f["TresPerNode"], f["TresPerJob"])
	}
	if c := f["AdminComment"]; !regexp.MustCompile(`shard:2 of a GPU's 4 instead of a whole GPU, room for a guest: its user's last 2 jobs of it peaked at [12][0-9]% GPU, 1024 MB`).MatchString(c) {
		t.Fatalf("the rewritten job's AdminComment does not say why with the measured figures: %q", c)
	}
	logLine := regexp.MustCompile(fmt.Sprintf(`rewritten into shards of one GPU.* uid=%d model=light shards=2 shards_per_gpu=4 jobs=2`, uid))
	if !logLine.MatchString(e.c.ControllerLog()) {
		t.Fatalf("slurmctld's log has no line for the rewrite:\n%s", e.c.ControllerLog())
	}
	t.Logf("%s", f["AdminComment"])
	e.waitState(host, "RUNNING", 90*time.Second)
	guest := sbatch("-p", "opp", "-J", "guest", "--gres=shard:2", "--wrap", "sleep 600")
	e.waitState(guest, "RUNNING", 90*time.Second)
	if j := e.jobs()[host]; j.State != "RUNNING" || e.restarts(host) != 0 {
		t.Fatalf("the host beside the guest: %+v, %d restarts", j, e.restarts(host))
	}
	// Issue 34 item 5: the host's spare shards are its guests' room, which
	// introspection and the memory bound judge. A guaranteed job asking
	// for them itself would be a second guaranteed job on the GPU, never
	// judged: the test user's is refused at submit, saying what to ask.
	if out, err := e.asTestUser("sbatch", "--parsable", "-D", e.work, "-o", "/dev/null", "-J", "intruder", "--gres=shard:1", "--wrap", "sleep 600"); err == nil ||
		!strings.Contains(out, `a share of a GPU (gres/shard, gres/mps) is only for the opportunistic partition "opp" here`) {
		if id, perr := strconv.ParseUint(strings.TrimSpace(out), 10, 32); perr == nil {
			e.c.Run("scancel", strconv.Itoa(int(id)))
		}
		t.Fatalf("a guaranteed job's own shard request beside a converted host: %v\n%s", err, out)
	}

	// Not rewritten: a busy model, an opt-out, another user's job.
	kept := map[string]uint32{
		"heavy":     sbatch("-J", "busy", "--comment", "model=heavy", "--gpus=1", "--wrap", "sleep 600"),
		"whole_gpu": sbatch("-J", "optout", "--comment", "model=light,whole_gpu", "--gpus=1", "--wrap", "sleep 600"),
		"root":      e.submit("-J", "other", "--comment", "model=light", "--gpus=1", "--wrap", "sleep 600"),
	}
	for why, id := range kept {
		t.Cleanup(func() { e.c.Run("scancel", strconv.Itoa(int(id))) })
		f := e.show(id)
		if !strings.Contains(f["TresPerJob"], "gpu:1") || strings.Contains(f["TresPerNode"], "shard") || strings.Contains(f["AdminComment"], "shard:") {
			t.Fatalf("%s: job %d rewritten: TresPerJob=%q TresPerNode=%q AdminComment=%q", why, id, f["TresPerJob"], f["TresPerNode"], f["AdminComment"])
		}
	}
}
