package cluster_test

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// lastPassLine is the newest "pass ranked …" line of slurmctld's log.
func (e *env) lastPassLine() string {
	m := regexp.MustCompile(`pass ranked [^\n]*`).FindAllString(e.c.ControllerLog(), -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// Issue 26 item 12: finished jobs that slurmctld keeps for MinJobAge (300 s
// here) are not handed to the passes again once recorded: "pass ranked N
// jobs" counts the live ones. Before the fix every pass copied, and
// counted, every finished job for as long as Slurm kept it ("pass ranked
// 6 jobs").
func TestFinishedJobsAreNotRanked(t *testing.T) {
	e := startCluster(t, 1, "")
	live := e.submit("-J", "live", "--gpus=1", "--wrap", "sleep 600")
	var short []uint32
	for i := 0; i < 5; i++ {
		short = append(short, e.submit("-J", fmt.Sprintf("short%d", i), "--gpus=1", "--wrap", "true"))
	}
	for _, id := range short {
		e.waitState(id, "COMPLETED", 60*time.Second)
	}
	e.waitState(live, "RUNNING", 30*time.Second)
	for _, id := range short {
		e.eventually(20*time.Second, fmt.Sprintf("job %d finished in the ledger", id), func() (bool, string) {
			r, ok := e.ledgerRecord(id)
			return ok && r.Finished != 0, fmt.Sprintf("%v %+v", ok, r)
		})
	}
	// Recorded once, then no longer copied into the passes (30 s grace).
	e.eventually(90*time.Second, "passes to hold only the live job", func() (bool, string) {
		l := e.lastPassLine()
		return strings.HasPrefix(l, "pass ranked 1 jobs (and recorded 0 that finished)"), l
	})
	if len(e.jobs()) != 6 {
		t.Fatalf("slurmctld lists %d jobs, want the 6 (finished ones kept for MinJobAge)", len(e.jobs()))
	}
}

// metric reads one unlabelled series from the core's /metrics (-1 if
// absent or unreadable).
func metric(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return -1
	}
	return v
}

// Issue 26 item 3: lachesis_preemptions_total counts requeues performed.
// Two demoted 2-GPU jobs fill the node; a new 2-GPU job needs one of them.
// Slurm asks preempt/tiresias about every candidate at every scheduling
// attempt, so the yeses (lachesis_preemptions_allowed_total) outnumber the
// one requeue; before the fix the requeue counter counted the yeses.
func TestPreemptionsMetricCountsRequeues(t *testing.T) {
	addr := freeTCPAddr(t)
	e := startCluster(t, 1, "metrics:\n  listen: "+addr+"\ntiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: 0}\n")
	a := e.submit("-J", "a", "--gpus=2", "--wrap", "sleep 600")
	b := e.submit("-J", "b", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(a, "RUNNING", 30*time.Second)
	e.waitState(b, "RUNNING", 30*time.Second)
	e.waitQueue(a, 1, 40*time.Second)
	e.waitQueue(b, 1, 40*time.Second)

	c := e.submit("-J", "c", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(c, "RUNNING", 30*time.Second)
	requeued := 0
	for _, id := range []uint32{a, b} {
		d, err := e.c.ShowJob(id)
		if err != nil {
			t.Fatal(err)
		}
		requeued += d.Restarts
	}
	if requeued != 1 {
		t.Fatalf("%d requeues of a and b, want 1", requeued)
	}
	e.eventually(20*time.Second, "lachesis_preemptions_total to count the requeue", func() (bool, string) {
		n := metric(addr, "lachesis_preemptions_total")
		return n == 1, fmt.Sprintf("lachesis_preemptions_total %v", n)
	})
	time.Sleep(3 * time.Second) // later passes and scheduling cycles must not add to it
	if n := metric(addr, "lachesis_preemptions_total"); n != 1 {
		t.Fatalf("lachesis_preemptions_total = %v with 1 requeue", n)
	}
	allowed := metric(addr, "lachesis_preemptions_allowed_total")
	if allowed < 1 {
		t.Fatalf("lachesis_preemptions_allowed_total = %v, want at least the requeue's", allowed)
	}
	t.Logf("1 requeue; Slurm was allowed %v times", allowed)
}

// Issue 26 item 2: slurmctld's log says which queue boundaries rank jobs,
// with their values, at start and after every reconfigure; with both keys
// set (as the shipped file once did) it says the fixed list is unused.
func TestThresholdsInForceAreLogged(t *testing.T) {
	both := "tiresias:\n  threshold_quantiles: [0.5, 0.75, 0.99]\n  thresholds: [3250, 32500, 325000, 3250000]\n"
	e := startCluster(t, 1, both)
	e.eventually(20*time.Second, "the start's thresholds line", func() (bool, string) {
		return e.logMatches(`queue thresholds in force when=start thresholds_gpu_s=\[2227,8215,2268824\] source="threshold_quantiles \[0.5,0.75,0.99\] of the bundled distribution[^"]*" unused="thresholds \[3250,32500,325000,3250000\]`), ""
	})

	// The admin edits only thresholds: the log says they are not used.
	if err := e.c.WriteLachesisYAML(tiresiasYAML(e.dir, "tiresias:\n  threshold_quantiles: [0.5, 0.75, 0.99]\n  thresholds: [20, 100000]\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "the reload's thresholds line naming the unused list", func() (bool, string) {
		return e.logMatches(`queue thresholds in force when=reload thresholds_gpu_s=\[2227,8215,2268824\] source="threshold_quantiles [^"]*" unused="thresholds \[20,100000\]`), ""
	})

	// Thresholds alone: the fixed list ranks, as logged.
	if err := e.c.WriteLachesisYAML(tiresiasYAML(e.dir, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "the reload's fixed thresholds line", func() (bool, string) {
		return e.logMatches(`queue thresholds in force when=reload thresholds_gpu_s=\[20,100000\] source="thresholds \(a fixed list\)"`), ""
	})
	id := e.submit("-J", "two", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(id, "RUNNING", 30*time.Second)
	e.waitQueue(id, 1, 40*time.Second) // 20 GPU-s reached in ~10 s
}

// Issue 26 item 9: every row sprio prints adds up (SITE + ASSOC + JOBSIZE +
// AGE + FAIRSHARE − NICE; PARTITION and QOS weigh 0 here) to its PRIORITY,
// which is the priority Slurm schedules the job by (squeue's %Q): for a
// ranked pending job, a running one, a niced one, and one whose priority an
// admin set. Before the fix the admin-set row read PRIORITY 12345 with
// SITE 0 next to a FAIRSHARE of 500 or more. Held jobs (priority 0) are not
// listed, as with Slurm's own plugins.
func TestSprioColumnsAddUp(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n")
	run := e.submit("-J", "run", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(run, "RUNNING", 30*time.Second)
	e.waitQueue(run, 1, 40*time.Second)
	waiting := e.submit("-J", "waiting", "--gpus=4", "--wrap", "sleep 600")
	niced := e.submit("-J", "niced", "--gpus=4", "--nice=100", "--wrap", "sleep 600")
	pinned := e.submit("-J", "pinned", "--gpus=4", "--begin=now+600", "--wrap", "sleep 600")
	held := e.submit("-H", "-J", "held", "--gpus=1", "--wrap", "sleep 600")
	if _, err := e.c.Run("scontrol", "update", "jobid="+strconv.Itoa(int(pinned)), "priority=12345"); err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "sprio rows for every job but the held one", func() (bool, string) {
		p := e.prio()
		return p[run].ID == run && p[waiting].ID == waiting && p[niced].ID == niced && p[pinned].ID == pinned,
			fmt.Sprintf("%+v", p)
	})
	time.Sleep(3 * time.Second) // a few passes after the update
	jobs, prio := e.jobs(), e.prio()
	if _, ok := prio[held]; ok {
		t.Errorf("held job %d is listed by sprio: %+v", held, prio[held])
	}
	if prio[pinned].Priority != 12345 {
		t.Errorf("admin-set job: sprio PRIORITY %d, want 12345", prio[pinned].Priority)
	}
	if prio[niced].Nice != 100 {
		t.Errorf("niced job: sprio NICE %d, want 100", prio[niced].Nice)
	}
	for id, p := range prio {
		sum := p.Site + p.Queue + p.Service + p.Age + p.FairShare - p.Nice
		if sum != p.Priority || p.Priority != int64(jobs[id].Priority) {
			t.Errorf("job %d: sprio %+v: columns sum to %d, PRIORITY %d, squeue %d", id, p, sum, p.Priority, jobs[id].Priority)
		}
	}
}

// Issue 26 item 8 and issue 20 item 9: `lachesis-profiler missing` after
// an ordinary user's submissions lists the keys worth profiling, not every
// job name, and never the user's terminal escapes. The user submits GPU
// jobs with unique names, two with --comment=model=resnet, three named
// with an escape sequence that would retitle the admin's window and clear
// the screen, and CPU-only jobs (never sized, never counted). Before the
// fix every unique name was listed and the escapes reached the terminal.
func TestMissingShowsKeysWorthProfiling(t *testing.T) {
	testenv.EnsureUser(t, testUser)
	bin := buildCommands(t)
	e := startCluster(t, 1, "")
	const evil = "\x1b]0;owned\x07\x1b[2Jevil"
	submitAs := func(args ...string) {
		t.Helper()
		argv := append([]string{"-u", testUser, "--", "sbatch", "--parsable", "--hold", "--chdir=/tmp", "--output=/dev/null"}, args...)
		if _, err := e.c.Run("runuser", append(argv, "--wrap", "sleep 60")...); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 5; i++ {
		submitAs("-J", fmt.Sprintf("uniq-%d", i), "--gpus=1")
	}
	for i := 0; i < 2; i++ {
		submitAs("-J", fmt.Sprintf("run-%d", i), "--gpus=1", "--comment=model=resnet")
	}
	for i := 0; i < 3; i++ {
		submitAs("-J", evil, "--gpus=1")
		submitAs("-J", "cpu-only")
	}
	missing := func(args ...string) string {
		out, err := exec.Command(filepath.Join(bin, "lachesis-profiler"), append([]string{"missing", "--db", e.dbPath()}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("lachesis-profiler missing: %v: %s", err, out)
		}
		return string(out)
	}
	var all string
	e.eventually(60*time.Second, "every GPU job's key in the file", func() (bool, string) {
		all = missing("--limit", "0", "--min-jobs", "1")
		return strings.Contains(all, "uniq-4") && strings.Contains(all, "resnet") && strings.Contains(all, "evil"), all
	})
	if strings.Contains(all, "cpu-only") {
		t.Errorf("a job without GPUs was counted:\n%s", all)
	}
	out := missing()
	if strings.Contains(out, "uniq-") || !regexp.MustCompile(`(?m)^resnet +2 `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\]0;owned\[2Jevil +3 `).MatchString(out) ||
		!strings.Contains(out, "5 more keys not shown") {
		t.Errorf("missing:\n%s", out)
	}
	for _, text := range []string{out, all} {
		if strings.ContainsAny(text, "\x1b\x07") {
			t.Errorf("missing printed the user's escape sequences: %q", text)
		}
	}
}
