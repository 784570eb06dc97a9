package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
)

// submitAs submits a running-forever 1-GPU batch job as user and returns
// its id.
func (e *agentEnv) submitAs(user, name string) uint32 {
	e.t.Helper()
	out, err := e.asUser(user, "sbatch", "--parsable", "-J", name, "--gpus=1", "-o", "/dev/null", "--wrap", "sleep 600")
	if err != nil {
		e.t.Fatalf("sbatch as %s: %v\n%s", user, err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 32)
	if err != nil {
		e.t.Fatalf("sbatch said %q", out)
	}
	return uint32(id)
}

// Issue 22 item 1, the controller's side: a node's per-job GPU usage,
// sent the way the node agent sends it (deliver.Client, munge-signed as
// root by the cluster's munged), reaches the running jobs of the test
// user it names: their AdminComment shows the summary beside Synergy's
// sizing reason, `lachesis-profiler jobs` lists them and `idle` the one
// that holds its GPU below usage.idle_below_pct for usage.idle_after. The
// attack: an entry naming another user's running job with the test
// user's uid changes nothing.
func TestJobGPUUseReachesAdminCommentAndProfiler(t *testing.T) {
	e := startAgentClusterFull(t, "", "usage:\n  idle_below_pct: 10\n  idle_after: 2\n", "", nil)
	u := testenv.EnsureUser(t, testUser)
	uid64, _ := strconv.ParseUint(u.Uid, 10, 32)
	uid := uint32(uid64)
	const other = "lachesis-tb"
	testenv.User(t, other)

	busy := e.submitAs(testUser, "busy-model")
	idle := e.submitAs(testUser, "idle-model")
	victim := e.submitAs(other, "victim-model")
	for _, id := range []uint32{busy, idle, victim} {
		e.waitState(id, "RUNNING", 60*time.Second)
	}
	e.waitPasses(2) // the core has seen them run
	sized := e.show(busy)["AdminComment"]
	victimBefore := e.show(victim)["AdminComment"]

	client := &deliver.Client{Addr: e.listen, Signer: &munge.Client{Socket: e.socket}, Timeout: 20 * time.Second}
	gpu := func(util, memMB float64) []wire.JobGPUUsage {
		return []wire.JobGPUUsage{{Index: 0, UUID: "GPU-fake-0", UtilPct: util, MemUsedMB: memMB, Sharers: 1}}
	}
	send := func(at time.Time, jobs ...wire.JobUsage) {
		t.Helper()
		rep := wire.JobUsageReport{Node: "lnode1", At: at, IntervalSec: 1, Jobs: jobs}
		ack, err := client.Send(context.Background(), wire.TypeJobUsage, &rep)
		if err != nil || !ack.OK {
			t.Fatalf("job-usage report: %+v, %v\n%s", ack, err, e.c.ControllerLog())
		}
	}
	now := time.Now()
	for i, at := range []time.Time{now.Add(-time.Second), now} {
		send(at,
			wire.JobUsage{JobID: busy, UID: uid, GPUs: gpu(50+20*float64(i), 2048),
				Progress: &wire.JobProgress{Iterations: uint64(100 * (i + 1)), ItersPerSec: 12.5, At: at}},
			wire.JobUsage{JobID: idle, UID: uid, GPUs: gpu(2, 512)},
			// The attack: another user's job, with this user's uid.
			wire.JobUsage{JobID: victim, UID: uid, GPUs: gpu(99, 99999)})
	}

	want := "[GPU use: mean 60%, peak 70%, memory peak 2.0 GiB, 12.5 it/s, 2 samples]"
	// A pass between the two reports shows the first alone, and the
	// segment is rewritten at most once a minute.
	e.eventually(100*time.Second, "the busy job's GPU use in its AdminComment", func() (bool, string) {
		c := e.show(busy)["AdminComment"]
		return strings.Contains(c, want), c
	})
	got := e.show(busy)["AdminComment"]
	if sized != "" && !strings.HasPrefix(got, sized+"; ") {
		t.Fatalf("Synergy's reason %q not kept before the usage segment: %q", sized, got)
	}
	if strings.Count(got, "[GPU use:") != 1 {
		t.Fatalf("more than one usage segment: %q", got)
	}
	t.Logf("job %d AdminComment: %s", busy, got)

	db := filepath.Join(e.dir, "lachesis", "lachesis.db")
	e.eventually(30*time.Second, "both jobs in lachesis-profiler jobs", func() (bool, string) {
		out, err := e.profilerCLI("", "jobs", "--db", db)
		return err == nil && regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+%s\s+running\s+2\s+60\s+70\s+2\.0\s`, busy, testUser)).MatchString(out) &&
			regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+%s\s+running\s+2\s+2\s+2\s`, idle, testUser)).MatchString(out), out
	})
	// Slurm's own figures (sacct's gres/gpuutil and gres/gpumem, 23.02+)
	// come only from NVML-backed gres: on the fake device there are none,
	// and the profiler says so rather than showing a zero.
	if out, err := e.profilerCLI("", "jobs", "--db", db); err != nil ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s.*\sn/a\s+n/a$`, busy)).MatchString(out) ||
		!strings.Contains(out, "n/a (not reported by Slurm)") {
		t.Fatalf("lachesis-profiler jobs without Slurm's GPU figures (%v):\n%s", err, out)
	}
	e.eventually(30*time.Second, "the idle job in lachesis-profiler idle", func() (bool, string) {
		out, err := e.profilerCLI("", "idle", "--db", db, "--below", "10", "--for", "2s")
		listed := regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s`, idle)).MatchString(out)
		if regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s`, busy)).MatchString(out) {
			t.Fatalf("the busy job is listed idle:\n%s", out)
		}
		return err == nil && listed, out
	})
	e.eventually(30*time.Second, "slurmctld's log line for the idle job", func() (bool, string) {
		return e.logMatches(fmt.Sprintf(`job holds its GPUs idle.* job_id=%d `, idle)), ""
	})

	// The attack changed nothing: no summary, no comment, logged as dropped.
	if !e.logMatches(`dropped job-usage entries.*wrong_user=`) {
		t.Fatalf("the wrong-uid entry was not logged as dropped:\n%s", e.c.ControllerLog())
	}
	if c := e.show(victim)["AdminComment"]; c != victimBefore || strings.Contains(c, "GPU use") {
		t.Fatalf("another user's job's AdminComment changed: %q, was %q", c, victimBefore)
	}
	out, err := e.profilerCLI("", "jobs", "--db", db)
	if err != nil || regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s`, victim)).MatchString(out) {
		t.Fatalf("another user's job has a summary (%v):\n%s", err, out)
	}
}
