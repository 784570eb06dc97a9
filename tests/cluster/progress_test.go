package cluster_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// progressEnv is an agent cluster whose slurmstepd loads lachesis_jobend
// (which names the agent's socket in LACHESIS_PROGRESS) and whose agent
// serves /metrics; the progress helper and attackPy are in the test
// user's working directory.
type progressEnv struct {
	*agentEnv
	metrics string // the agent's metrics address
}

func startProgressCluster(t *testing.T) *progressEnv {
	t.Helper()
	addr := freeTCPAddr(t)
	e := &progressEnv{startAgentClusterFull(t, "", "", "metrics:\n  listen: "+addr+"\n", jobEndPlugin(t)), addr}
	helper, err := os.ReadFile(filepath.Join(repoRoot, "etc", "lachesis_progress.py"))
	if err != nil {
		t.Fatal(err)
	}
	u := testenv.EnsureUser(t, testUser)
	uid, _ := strconv.Atoi(u.Uid)
	for name, body := range map[string][]byte{"lachesis_progress.py": helper, "attack.py": []byte(attackPy)} {
		p := filepath.Join(e.work, name)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, -1)
	}
	return e
}

// attackPy is what a hostile job of the test user runs against the
// agent's socket ($LACHESIS_PROGRESS), printing each answer on a line.
const attackPy = `import os, socket, sys, time
path = os.environ["LACHESIS_PROGRESS"]

def ask(raw):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    try:
        s.sendall(raw)
    except OSError:
        pass  # the agent stopped reading: its answer is still there
    line = s.makefile("rb").readline()
    s.close()
    return line.decode().strip()

def fire(raw):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(0.05)
    try:
        s.connect(path)
        s.sendall(raw)
    except OSError:
        pass
    s.close()

mode = sys.argv[1]
if mode == "claim":  # every way of naming another job
    other = int(sys.argv[2])
    for n in (10, 40):
        print(ask(b'{"op":"progress","job_id":%d,"job_end":{"job_id":%d,"end":1},"report":{"iterations":%d,"job_id":%d,"job":%d}}' % (other, other, n, other, other)), flush=True)
        time.sleep(2)
elif mode == "oversized":
    print(ask(b'{"op":"progress","report":{"iterations":1},"pad":"' + b"x" * 4096 + b'"}'), flush=True)
    print(ask(b'{"op":"progress","report":{"iterations":1},"pad":"' + b"x" * (5 << 20) + b'"}'), flush=True)
elif mode == "flood":  # as fast as one process can, for SECONDS
    end, n = time.monotonic() + float(sys.argv[2]), 0
    while time.monotonic() < end:
        n += 1
        fire(b'{"op":"progress","report":{"iterations":%d}}' % n)
    print(n, flush=True)
`

// scrape returns the agent's /metrics text.
func (e *progressEnv) scrape() string {
	resp, err := http.Get("http://" + e.metrics + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return string(b)
}

// seriesValue is the value of the series written exactly as series (name and
// labels) in the scrape, and whether it is there.
func seriesValue(scrape, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(scrape)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

func jobRateSeries(id uint32) string {
	return fmt.Sprintf(`lachesis_agent_job_iterations_per_second{hpc_job="%d"}`, id)
}

// sbatchAsTestUser submits a batch job of the test user in its working
// directory and returns its id.
func (e *progressEnv) sbatchAsTestUser(args ...string) uint32 {
	e.t.Helper()
	out, err := e.asTestUser(append([]string{"sbatch", "--parsable", "-N1", "-n1", "-D", e.work, "-o", e.work + "/slurm-%j.out"}, args...)...)
	if err != nil {
		e.t.Fatalf("sbatch: %v\n%s", err, out)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(out), 10, 32)
	if err != nil {
		e.t.Fatalf("sbatch said %q", out)
	}
	return uint32(id)
}

// Issue 22 item 2 end to end: a batch job of the test user runs a loop of
// 20 iterations a second with etc/lachesis_progress.py; the SPANK plugin
// told it where the agent is, and the agent's /metrics shows the job's
// rate under its job id. When the job ends (slurmstepd's job-end report),
// the series is gone.
func TestJobProgressShowsOnTheAgentsMetrics(t *testing.T) {
	e := startProgressCluster(t)
	const rate = 20.0
	id := e.sbatchAsTestUser("-J", "reports-progress", "--wrap",
		fmt.Sprintf(`echo "LACHESIS_PROGRESS=$LACHESIS_PROGRESS"; exec python3 lachesis_progress.py loop %v 40`, rate))
	e.waitState(id, "RUNNING", 60*time.Second)
	var got float64
	e.eventually(60*time.Second, "the job's rate on the agent's /metrics", func() (bool, string) {
		s := e.scrape()
		v, ok := seriesValue(s, jobRateSeries(id))
		got = v
		// Reports every 1.5 s, the rate smoothed over 30 s: a steady loop
		// reads its own rate; the slack is for a loaded machine.
		return ok && v > rate*0.7 && v < rate*1.3, s
	})
	t.Logf("job %d: %.2f iterations/s on /metrics (loop of %v/s)", id, got, rate)
	out, _ := os.ReadFile(filepath.Join(e.work, fmt.Sprintf("slurm-%d.out", id)))
	if !strings.Contains(string(out), "LACHESIS_PROGRESS="+e.agentSock) {
		t.Fatalf("the job's environment does not name the agent's socket:\n%s", out)
	}
	e.waitState(id, "COMPLETED", 90*time.Second)
	e.eventually(30*time.Second, "the ended job's series gone", func() (bool, string) {
		s := e.scrape()
		_, ok := seriesValue(s, jobRateSeries(id))
		return !ok, s
	})
}

// The attacks on progress reports, each as the ordinary test user:
//   - a report from outside any job is refused;
//   - a process in the user's job that names another job of theirs (in
//     every field a request could carry) reports for its own job only;
//   - a flood from inside a job is rate-limited (one accepted report a
//     second) and leaves the agent's memory flat;
//   - an oversized report is refused.
func TestProgressAttacks(t *testing.T) {
	e := startProgressCluster(t)
	out, err := e.asTestUser("env", "LACHESIS_PROGRESS="+e.agentSock, "python3", "lachesis_progress.py", "check")
	if err == nil || !strings.Contains(out, "progress is reported from inside a Slurm job of yours") {
		t.Fatalf("a report from outside any job: %v\n%s", err, out)
	}
	if v, _ := seriesValue(e.scrape(), `lachesis_agent_progress_reports_total{outcome="refused"}`); v != 1 {
		t.Fatalf("%v refused reports counted, want 1", v)
	}

	other := e.sbatchAsTestUser("-J", "victim", "--wrap", "sleep 300")
	e.waitState(other, "RUNNING", 60*time.Second)
	claimer := e.sbatchAsTestUser("-J", "claimer", "--wrap", fmt.Sprintf("python3 attack.py claim %d > claim.out; sleep 300", other))
	e.waitState(claimer, "RUNNING", 60*time.Second)
	claimOut := filepath.Join(e.work, "claim.out")
	var answers []string
	e.eventually(60*time.Second, "the claiming job's two answers", func() (bool, string) {
		b, _ := os.ReadFile(claimOut)
		answers = strings.Fields(string(b))
		return len(answers) == 2, string(b)
	})
	for _, a := range answers {
		if !strings.Contains(a, fmt.Sprintf(`"job_id":%d,`, claimer)) {
			t.Fatalf("a report naming job %d from job %d was answered %s", other, claimer, a)
		}
	}
	e.eventually(30*time.Second, "the claimer's own rate", func() (bool, string) {
		s := e.scrape()
		_, mine := seriesValue(s, jobRateSeries(claimer))
		_, theirs := seriesValue(s, jobRateSeries(other))
		if theirs {
			t.Fatalf("job %d has a rate it never reported:\n%s", other, s)
		}
		return mine, s
	})

	e.sbatchAsTestUser("-J", "oversized", "--wrap", "python3 attack.py oversized > oversized.out; sleep 300")
	e.eventually(60*time.Second, "the oversized reports' answers", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(e.work, "oversized.out"))
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		return len(lines) == 2, string(b)
	})
	b, _ := os.ReadFile(filepath.Join(e.work, "oversized.out"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !strings.Contains(lines[0], "bad request: a progress report of") || !strings.Contains(lines[1], "bad request") {
		t.Fatalf("oversized reports were not refused:\n%s", b)
	}

	// The flood. A first one warms the agent up (goroutines, buffers);
	// the second, twice as long, must not grow its memory further.
	pid := e.agent.Process.Pid
	before := e.scrape()
	accepted0, _ := seriesValue(before, `lachesis_agent_progress_reports_total{outcome="accepted"}`)
	flood := func(name string, seconds int) (sent int, took time.Duration) {
		start := time.Now()
		id := e.sbatchAsTestUser("-J", name, "--wrap", fmt.Sprintf("python3 attack.py flood %d > %s.out", seconds, name))
		e.waitState(id, "COMPLETED", time.Duration(seconds)*time.Second+90*time.Second)
		b, _ := os.ReadFile(filepath.Join(e.work, name+".out"))
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("flood %s: %q", name, b)
		}
		return n, time.Since(start)
	}
	sent1, _ := flood("flood-warm", 5)
	rss1 := vmRSS(t, pid)
	sent2, took := flood("flood", 10)
	rss2 := vmRSS(t, pid)
	after := e.scrape()
	accepted, _ := seriesValue(after, `lachesis_agent_progress_reports_total{outcome="accepted"}`)
	tooSoon, _ := seriesValue(after, `lachesis_agent_progress_reports_total{outcome="too_soon"}`)
	jobs, _ := seriesValue(after, `lachesis_agent_progress_jobs`)
	t.Logf("floods of %d and %d reports: %v accepted, %v dropped as too soon; agent RSS %d kB after the first, %d kB after the second; %v jobs tracked",
		sent1, sent2, accepted-accepted0, tooSoon, rss1>>10, rss2>>10, jobs)
	// Both flooding jobs ran within took plus the first's ~5 s; each
	// is allowed one report a second, and one at its start.
	if limit := took.Seconds() + 5 + 2*2; accepted-accepted0 > limit {
		t.Fatalf("%v reports accepted from the floods within %.0f s; the limit is one a second per job", accepted-accepted0, limit)
	}
	if tooSoon == 0 {
		t.Fatalf("of %d flooded reports none was dropped as too soon", sent1+sent2)
	}
	if grown := rss2 - rss1; grown > 16<<20 {
		t.Fatalf("the agent's RSS grew by %d kB during the second flood", grown>>10)
	}
	if jobs > 4 {
		t.Fatalf("%v jobs tracked after the floods; at most the 4 reporting jobs", jobs)
	}
}
