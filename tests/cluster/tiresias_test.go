package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// Queue 0's band starts at 2/3 of the default Tiresias weight (K=3 queues).
const queue0Floor = 66_666_666

func TestNewJobStartsBeforeDemotedJobs(t *testing.T) {
	parallelUnlessAlone(t) // its subtests each start a cluster
	for _, mode := range []string{"las", "gittins"} {
		t.Run(mode, func(t *testing.T) { newJobStartsBeforeDemotedJobs(t, mode) })
	}
}

func newJobStartsBeforeDemotedJobs(t *testing.T, mode string) {
	e := startCluster(t, 1, "tiresias:\n  mode: "+mode+"\n  thresholds: [40, 100000]\n  promote_knob: 0\n  preemption: {min_run: 0}\n")
	demoted := e.submit("-J", "demoted", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(demoted, "RUNNING", 30*time.Second)

	// 4 GPUs × 10 s crosses 40 GPU-s: sprio and squeue both show it.
	p := e.waitQueue(demoted, 1, 40*time.Second)
	if p.Service < 40 {
		t.Fatalf("demoted with %d GPU-s of service, want >= 40", p.Service)
	}
	if prio := e.jobs()[demoted].Priority; prio >= queue0Floor {
		t.Fatalf("demoted job's squeue priority %d is still in queue 0's band", prio)
	}

	// A new job preempts it, runs 6 s (24 GPU-s: stays in queue 0)...
	blocker := e.submit("-J", "blocker", "--gpus=4", "--wrap", "sleep 6")
	e.waitState(blocker, "RUNNING", 30*time.Second)
	// ...while a second new job waits behind it with the demoted one.
	fresh := e.submit("-J", "fresh", "--gpus=4", "--wrap", "sleep 5")
	e.waitPasses(1) // a pass ranks both waiting jobs
	j := e.jobs()
	if j[demoted].State != "PENDING" || j[fresh].State != "PENDING" {
		t.Fatalf("want demoted and fresh both pending, got %+v and %+v", j[demoted], j[fresh])
	}
	if j[fresh].Priority <= j[demoted].Priority {
		t.Fatalf("fresh job priority %d not above demoted job's %d", j[fresh].Priority, j[demoted].Priority)
	}
	// When the blocker ends, the fresh job, submitted later, starts first.
	e.waitState(fresh, "RUNNING", 40*time.Second)
	if st := e.jobs()[demoted].State; st != "PENDING" {
		t.Fatalf("demoted job is %s while the fresh job runs; want PENDING", st)
	}
}

func TestDemotedJobIsRequeuedForNewJobAndKeepsService(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: 0}\n")
	long := e.submit("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	before := e.waitQueue(long, 1, 40*time.Second)

	short := e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 600")
	e.waitState(short, "RUNNING", 30*time.Second)
	d, err := e.c.ShowJob(long)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "PENDING" || d.Restarts < 1 {
		t.Fatalf("long job: state %s, restarts %d; want PENDING after a requeue", d.State, d.Restarts)
	}
	if !e.logMatches(fmt.Sprintf(`preempted JobId=%d has been requeued`, long)) {
		t.Fatal("slurmctld's log does not show the preemption")
	}

	// Its attained service survived the requeue: in sprio and in the ledger.
	var after slurmcluster.Prio
	e.eventually(10*time.Second, "sprio to show the requeued job", func() (bool, string) {
		after = e.prio()[long]
		return after.ID == long, fmt.Sprintf("%+v", after)
	})
	if after.Service < before.Service || after.Service < 20 {
		t.Fatalf("service after requeue = %d GPU-s, had %d before: it was reset", after.Service, before.Service)
	}
	if after.Queue != 1 {
		t.Fatalf("requeued job is in queue %d, want 1", after.Queue)
	}
	// The pass that sees the requeue closes the run at Slurm's end of it;
	// sprio, read before that pass, may show the last running pass's
	// figure: the two agree once the run is closed.
	e.eventually(30*time.Second, "the ledger to close the first run, as sprio shows it", func() (bool, string) {
		r, ok := e.ledgerRecord(long)
		p := e.prio()[long]
		return ok && r.RunStart == 0 && int64(r.ServiceClosed) == p.Service, fmt.Sprintf("sprio %d GPU-s; %+v", p.Service, r)
	})

	// When it runs again, service continues from there.
	if _, err := e.c.Run("scancel", strconv.Itoa(int(short))); err != nil {
		t.Fatal(err)
	}
	e.waitState(long, "RUNNING", 30*time.Second)
	e.eventually(15*time.Second, "service to grow past the first run", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return r.Runs == 2 && r.Total() > float64(after.Service), fmt.Sprintf("%+v", r)
	})
}

// preempt/tiresias answers Slurm with the core's cost rule: a demoted job
// whose run is younger than min_run keeps its GPUs; once it is old enough
// a waiting job of queue 0 requeues it, and slurmctld's log and the ledger
// say why.
func TestYoungDemotedJobKeepsItsGPUsUntilMinRun(t *testing.T) {
	// min_run well past the demotion (4 GPUs x 5 s) and the short job's
	// arrival, short enough to keep the test short.
	const minRun = 30
	e := startCluster(t, 1, fmt.Sprintf("tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: %d}\n", minRun))
	long := e.submit("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	e.waitQueue(long, 1, 40*time.Second)
	short := e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 600")

	// While the long job's run is under min_run, the short one waits.
	for {
		d, err := e.c.ShowJob(long)
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.c.ShowJob(short)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != "RUNNING" {
			t.Fatalf("long job %s before min_run; short job %s", d.State, s.State)
		}
		if s.State != "PENDING" {
			t.Fatalf("short job %s while the long job's run is under min_run", s.State)
		}
		r, ok := e.ledgerRecord(long)
		if ok && r.RunOpen && r.RunSeconds >= minRun-10 {
			break // well into the young run, and nothing was preempted
		}
		time.Sleep(time.Second)
	}

	e.waitState(short, "RUNNING", 60*time.Second)
	if !e.logMatches(fmt.Sprintf(`preempted JobId=%d has been requeued`, long)) {
		t.Fatal("slurmctld's log does not show the preemption")
	}
	e.eventually(20*time.Second, "the core to log why the job was preempted", func() (bool, string) {
		return e.logMatches(fmt.Sprintf(`lachesis: job preempted job_id=%d preemptor_job_id=%d `, long, short)), ""
	})
	e.eventually(20*time.Second, "the ledger to keep the reason", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		var ran float64
		_, err := fmt.Sscanf(r.PreemptReason, "preempted by job %d (queue 0) from queue 1 after a %f s run", new(uint32), &ran)
		return err == nil && ran >= minRun, r.PreemptReason
	})
}

// A job just past a queue threshold, while new short jobs keep arriving,
// is requeued at most once per min_run of running (its first run reaches
// 40 s as the window ends, a second needs 40 s more): it is not traded back
// and forth with every arrival. With min_run 0 (the paper's rule) the same
// arrivals requeue it again and again, so the test can fail. Slurm's
// Restarts and the ledger's Runs count the requeues.
func TestNearThresholdJobNotRequeuedBackAndForth(t *testing.T) {
	parallelUnlessAlone(t) // its subtests each start a cluster
	// Names stay short: the cluster's munge socket path holds them.
	cases := []struct {
		name            string
		minRun          int
		atLeast, atMost int // requeues in the 40-s window
	}{
		{"min_run 40", 40, 0, 1},
		{"min_run 0", 0, 3, 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := requeuesUnderArrivals(t, tc.minRun)
			if got < tc.atLeast || got > tc.atMost {
				t.Fatalf("long job requeued %d times in the window, want %d to %d", got, tc.atLeast, tc.atMost)
			}
		})
	}
}

// Slurm takes victims in the core's order (PREEMPT_DATA_PRIO): with
// spread_victims the second short job requeues the long job that was not
// requeued yet; without it, the lowest-ranked one again (2D-LAS: its queue
// entry, and so its rank, did not change when it was requeued).
func TestSpreadVictimsInSlurm(t *testing.T) {
	parallelUnlessAlone(t) // its subtests each start a cluster
	cases := []struct {
		spread    bool
		sameTwice bool
	}{{true, false}, {false, true}}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("spread_%v", tc.spread), func(t *testing.T) {
			e := startCluster(t, 1, fmt.Sprintf("tiresias:\n  mode: las\n  thresholds: [20, 100000]\n  promote_knob: 0\n"+
				"  preemption: {min_run: 0, spread_victims: %v}\n", tc.spread))
			a := e.submit("-J", "longA", "--gpus=2", "--wrap", "sleep 600")
			b := e.submit("-J", "longB", "--gpus=2", "--wrap", "sleep 600")
			e.waitState(a, "RUNNING", 30*time.Second)
			e.waitState(b, "RUNNING", 30*time.Second)
			e.waitQueue(a, 1, 40*time.Second)
			e.waitQueue(b, 1, 40*time.Second)

			victim := func(short uint32) uint32 {
				e.waitState(short, "RUNNING", 30*time.Second)
				var v uint32
				e.eventually(10*time.Second, "one long job requeued", func() (bool, string) {
					j := e.jobs()
					switch {
					case j[a].State == "PENDING" && j[b].State == "RUNNING":
						v = a
					case j[b].State == "PENDING" && j[a].State == "RUNNING":
						v = b
					}
					return v != 0, fmt.Sprintf("A %s, B %s", j[a].State, j[b].State)
				})
				return v
			}
			first := victim(e.submit("-J", "short1", "--gpus=2", "--wrap", "sleep 3"))
			e.waitState(first, "RUNNING", 40*time.Second)
			// A pass sees the restart: the core counts the requeue.
			e.eventually(10*time.Second, "the ledger to count the requeue", func() (bool, string) {
				r, _ := e.ledgerRecord(first)
				return r.Requeues() == 1 && r.RunOpen, fmt.Sprintf("%+v", r)
			})
			second := victim(e.submit("-J", "short2", "--gpus=2", "--wrap", "sleep 3"))
			if (second == first) != tc.sameTwice {
				t.Fatalf("first victim %d, second %d; want the same job twice: %v", first, second, tc.sameTwice)
			}
		})
	}
}

// requeuesUnderArrivals runs a 4-GPU job on the one 4-GPU node until it
// has just crossed the 20 GPU-s threshold, then submits a 3-s one-GPU job
// every 10 s for 40 s and returns how often the long job was requeued.
func requeuesUnderArrivals(t *testing.T, minRun int) int {
	e := startCluster(t, 1, fmt.Sprintf("tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: %d}\n", minRun))
	long := e.submit("-J", "long", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(long, "RUNNING", 30*time.Second)
	e.waitQueue(long, 1, 40*time.Second) // 4 GPUs x 5 s: just past 20 GPU-s
	for range 4 {
		e.submit("-J", "short", "--gpus=1", "--wrap", "sleep 3")
		time.Sleep(10 * time.Second)
	}
	d, err := e.c.ShowJob(long)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("min_run %d: long job requeued %d times, now %s", minRun, d.Restarts, d.State)
	// The ledger counts the same requeues (a run it has not seen yet
	// shows once the next pass observes the job again).
	e.eventually(10*time.Second, "the ledger to count the requeues", func() (bool, string) {
		r, _ := e.ledgerRecord(long)
		return r.Requeues() >= d.Restarts-1 && r.Requeues() <= d.Restarts, fmt.Sprintf("%d requeues in the ledger", r.Requeues())
	})
	return d.Restarts
}

func TestStarvationPromotionInTheRealCluster(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0.5\n  preemption: {min_run: 0}\n")
	starved := e.submit("-J", "starved", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(starved, "RUNNING", 30*time.Second)
	e.waitQueue(starved, 1, 40*time.Second)
	hog := e.submit("-J", "hog", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(hog, "RUNNING", 30*time.Second)

	// Waiting 0.5 × its ~6 s run sends it back to queue 0, service kept.
	e.eventually(40*time.Second, "promotion in slurmctld's log", func() (bool, string) {
		return e.logMatches(fmt.Sprintf(`lachesis: job promoted to queue 0 \(starvation\) job_id=%d `, starved)), ""
	})
	r, ok := e.ledgerRecord(starved)
	if !ok || r.Promotions < 1 || r.Total() < 20 {
		t.Fatalf("ledger after promotion: %+v; want a promotion and the service kept", r)
	}
}

func TestKill9OfSlurmctldKeepsServiceAndOrder(t *testing.T) {
	// No preemption here, so the queue stays still while we look at it.
	e := startCluster(t, 1, "tiresias:\n  thresholds: [30, 100000]\n  promote_knob: 0\n", "PreemptType=preempt/none", "PreemptMode=OFF")
	a := e.submit("-J", "a", "--gpus=2", "--wrap", "sleep 600")
	b := e.submit("-J", "b", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(a, "RUNNING", 30*time.Second)
	e.waitState(b, "RUNNING", 30*time.Second)
	var waiting []uint32
	for i := 0; i < 4; i++ {
		waiting = append(waiting, e.submit("-J", fmt.Sprintf("w%d", i), "--gpus=2", "--wrap", "sleep 600"))
	}
	e.waitQueue(a, 1, 40*time.Second)
	// Requeue a: now a pending job with closed service in queue 1.
	if _, err := e.c.Run("scontrol", "requeue", strconv.Itoa(int(a))); err != nil {
		t.Fatal(err)
	}
	e.eventually(15*time.Second, "the ledger to hold a's closed run", func() (bool, string) {
		r, _ := e.ledgerRecord(a)
		return r.Runs == 1 && r.RunStart == 0 && r.ServiceClosed >= 30, fmt.Sprintf("%+v", r)
	})
	// a's GPUs go to the first waiting job: wait for that start, so that
	// no job starts between the save below and the kill.
	e.eventually(30*time.Second, "a waiting job to take a's GPUs", func() (bool, string) {
		running := 0
		for _, j := range e.jobs() {
			if j.State == "RUNNING" {
				running++
			}
		}
		return running == 2, fmt.Sprintf("%d running", running)
	})
	settled := time.Now()
	// slurmctld saves job state a few seconds after a change; let it, so
	// what we compare is what a crash would really leave behind.
	e.waitJobStateSaved(settled)
	before, states := e.prio(), e.jobs()
	order := pendingOrder(states)

	if err := e.c.KillController(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	e.waitPasses(3)
	after := e.prio()
	for id, p := range before {
		q := after[id]
		switch states[id].State {
		case "PENDING":
			if q.Service != p.Service || q.Queue != p.Queue {
				t.Errorf("pending job %d: before kill -9 %+v, after restart %+v", id, p, q)
			}
		case "RUNNING":
			if q.Service < p.Service {
				t.Errorf("running job %d lost service: %d -> %d", id, p.Service, q.Service)
			}
		}
	}
	if r, _ := e.ledgerRecord(a); int64(r.ServiceClosed) != before[a].Service {
		t.Errorf("ledger holds %v GPU-s for job %d, sprio showed %d before the crash", r.ServiceClosed, a, before[a].Service)
	}
	if got := pendingOrder(e.jobs()); fmt.Sprint(got) != fmt.Sprint(order) {
		t.Errorf("pending order changed across the restart: %v -> %v", order, got)
	}
	if len(order) < 3 {
		t.Errorf("only %d pending jobs to compare; the test needs a queue", len(order))
	}
}

// pendingOrder lists pending jobs from highest to lowest priority.
func pendingOrder(jobs map[uint32]slurmcluster.Job) []uint32 {
	var ids []uint32
	for id, j := range jobs {
		if j.State == "PENDING" {
			ids = append(ids, id)
		}
	}
	for i := range ids { // few jobs: insertion sort, ties by id
		for k := i; k > 0; k-- {
			a, b := jobs[ids[k-1]], jobs[ids[k]]
			if a.Priority > b.Priority || (a.Priority == b.Priority && a.ID < b.ID) {
				break
			}
			ids[k-1], ids[k] = ids[k], ids[k-1]
		}
	}
	return ids
}

func TestMalformedYAMLOnReconfigureKeepsPreviousConfig(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [100, 100000]\n  promote_knob: 0\n")
	job := e.submit("-J", "job", "--gpus=4", "--wrap", "sleep 600")
	e.waitState(job, "RUNNING", 30*time.Second)

	// Each bad file would, if it were applied, keep the job in queue 0 past
	// 100 GPU-s of service (the defaults' first threshold is 3250), or
	// move it to queue 1 before 16 GPU-s (thresholds from 10).
	oversized := tiresiasYAML(e.dir, "tiresias:\n  thresholds: [100000, 200000]\n") +
		"# " + strings.Repeat("x", 2<<20) + "\n"
	bad := []struct{ name, text, reason string }{
		{"non-numeric threshold", tiresiasYAML(e.dir, "tiresias:\n  thresholds: [10, abc]\n"), "tiresias.thresholds"},
		{"misspelt key", tiresiasYAML(e.dir, "tiresias:\n  thresold: [10]\n"), "thresold"},
		{"broken YAML", tiresiasYAML(e.dir, "tiresias: [\n"), "not valid YAML"},
		// An emptied file would otherwise reset everything to the defaults
		// (pass_interval 1 s -> 30 s, thresholds -> 3250...).
		{"empty file", "", "the file sets no key"},
		{"comments-only file", "# pass_interval: 1\n\n", "the file sets no key"},
		// Refused from its size: slurmctld never reads the 2 MiB.
		{"2 MiB file", oversized, "the file is too large: 2097"},
	}
	refused := regexp.MustCompile(`config not reloaded, keeping the previous one: .*`)
	for i, b := range bad {
		if err := e.c.WriteLachesisYAML(b.text); err != nil {
			t.Fatal(err)
		}
		e.c.Reconfigure() //nolint:errcheck // slurmctld's answer is not what we test
		// The (i+1)th refusal is this file's, and it says why.
		e.eventually(10*time.Second, "the log to say why the "+b.name+" was refused", func() (bool, string) {
			lines := refused.FindAllString(e.c.ControllerLog(), -1)
			if len(lines) <= i {
				return false, fmt.Sprintf("%d refusals logged", len(lines))
			}
			return regexp.MustCompile(`lachesis\.yaml: .*` + regexpQuote(b.reason)).MatchString(lines[i]), lines[i]
		})
		if !e.c.Ping() {
			t.Fatalf("slurmctld died on a reconfigure with a %s", b.name)
		}
	}
	// The previous thresholds still hold: after 16+ GPU-s (> 10) the job
	// is still in queue 0, and past 100 GPU-s (< 3250) it is in queue 1.
	var p slurmcluster.Prio
	e.eventually(30*time.Second, "16 GPU-s of service", func() (bool, string) {
		p = e.prio()[job]
		return p.Service >= 16, fmt.Sprintf("%+v", p)
	})
	if p.Queue != 0 {
		t.Fatalf("after bad reloads: %+v; want queue 0 under the previous threshold 100", p)
	}
	e.waitQueue(job, 1, 60*time.Second)
	// A good file takes effect.
	if err := e.c.WriteLachesisYAML(tiresiasYAML(e.dir, "tiresias:\n  thresholds: [100, 110]\n  promote_knob: 0\n")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Reconfigure(); err != nil {
		t.Fatal(err)
	}
	e.waitQueue(job, 2, 30*time.Second)
}

func regexpQuote(s string) string {
	return strings.NewReplacer(".", `\.`, "[", `\[`, "(", `\(`).Replace(s)
}

func TestBadConfigAtStartupStopsSlurmctldNamingTheKey(t *testing.T) {
	parallelUnlessAlone(t) // its subtests each start a cluster
	tests := []struct {
		name    string
		file    func(dir string) string
		mention string
	}{
		{"unknown mode stops slurmctld",
			func(dir string) string { return tiresiasYAML(dir, "tiresias:\n  mode: fifo\n") }, "tiresias.mode"},
		// Only a missing file means the defaults; an emptied one is an error.
		{"comments-only file stops slurmctld",
			func(string) string { return "# emptied\n" }, "lachesis.yaml: invalid lachesis config: the file sets no key"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parallelUnlessAlone(t)
			// Short: the munge socket's path under it must fit in sun_path.
			dir := filepath.Join(testDirRoot, fmt.Sprintf("BadConfigAtStartup%d", i))
			os.RemoveAll(dir)
			fragment, _ := os.ReadFile(filepath.Join(repoRoot, "etc", "slurm.conf.lachesis"))
			c, err := slurmcluster.Up(t.Context(), repoRoot, slurmcluster.Options{
				Dir: dir, Nodes: 1, GPUsPerNode: 4, PortBase: reservePortBlock(t),
				PluginDir:    pluginDir,
				LachesisYAML: tc.file(dir),
				ExtraConf:    string(fragment),
			})
			t.Cleanup(func() {
				if c != nil {
					c.Down() //nolint:errcheck
				}
			})
			if err == nil {
				t.Fatal("slurmctld started with a bad lachesis.yaml")
			}
			log := c.ControllerLog()
			if !strings.Contains(log, tc.mention) || !strings.Contains(log, "fatal") {
				t.Fatalf("slurmctld's log does not name %q in a fatal error (Up: %v):\n%s", tc.mention, err, tail(log, 15))
			}
		})
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func TestSshareWorksWithThePluginConfigured(t *testing.T) {
	e := startCluster(t, 1, "")
	out, err := e.c.Run("sshare", "-a")
	if err != nil {
		t.Fatalf("sshare failed: %v", err)
	}
	if !strings.Contains(out, "Account") {
		t.Fatalf("sshare printed no table:\n%s", out)
	}
	if !e.c.Ping() {
		t.Fatal("slurmctld is not answering after sshare")
	}
}

func TestHeldJobsAndAdminPrioritiesAreLeftAlone(t *testing.T) {
	e := startCluster(t, 1, "")
	held := e.submit("-H", "-J", "held", "--gpus=1", "--wrap", "sleep 60")
	pinned := e.submit("-J", "pinned", "--gpus=4", "--begin=now+600", "--wrap", "sleep 60")
	if _, err := e.c.Run("scontrol", "update", "jobid="+strconv.Itoa(int(pinned)), "priority=4242"); err != nil {
		t.Fatal(err)
	}
	e.waitPasses(3)
	j := e.jobs()
	if j[held].Priority != 0 {
		t.Fatalf("held job got priority %d", j[held].Priority)
	}
	if j[pinned].Priority != 4242 {
		t.Fatalf("admin-set priority 4242 became %d", j[pinned].Priority)
	}
	if _, err := e.c.Run("scontrol", "release", strconv.Itoa(int(held))); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, "released job to get a queue-0 priority", func() (bool, string) {
		p := e.jobs()[held].Priority
		return p >= queue0Floor, strconv.Itoa(int(p))
	})
}

// A new job without GPUs has no attained service yet and sits in queue 0, above any
// demoted GPU job; it must still never requeue one to get its CPUs.
func TestCPUOnlyJobDoesNotPreemptDemotedGPUJob(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n  preemption: {min_run: 0}\n")
	// The GPU job takes every CPU of the node (8), so the CPU-only job could
	// start only by requeueing it.
	gpuJob := e.submit("-J", "gpu", "--gpus=2", "-c", "8", "--wrap", "sleep 600")
	e.waitState(gpuJob, "RUNNING", 30*time.Second)
	e.waitQueue(gpuJob, 1, 40*time.Second)

	cpuJob := e.submit("-J", "cpu", "-c", "1", "--wrap", "sleep 600")
	// Slurm has tried it (and would have preempted in that attempt) once
	// the reason says it waits for resources, or once it runs.
	e.eventually(30*time.Second, "Slurm to try the CPU-only job", func() (bool, string) {
		j := e.jobs()[cpuJob]
		return j.State != "PENDING" || j.Reason == "Resources", fmt.Sprintf("%+v", j)
	})
	d, err := e.c.ShowJob(gpuJob)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != "RUNNING" || d.Restarts != 0 {
		t.Fatalf("demoted GPU job: state %s, restarts %d; want RUNNING, never requeued for a CPU-only job", d.State, d.Restarts)
	}

	// The demoted job was preemptable all along: a GPU job of queue 0 does
	// requeue it.
	newGPU := e.submit("-J", "newgpu", "--gpus=1", "-c", "1", "--wrap", "sleep 600")
	e.waitState(newGPU, "RUNNING", 60*time.Second)
	if d, err = e.c.ShowJob(gpuJob); err != nil {
		t.Fatal(err)
	}
	if d.Restarts != 1 {
		t.Fatalf("demoted GPU job restarts %d after a GPU job of queue 0 came; want 1", d.Restarts)
	}
}
