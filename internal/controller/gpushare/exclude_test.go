package gpushare

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// fakeSlurm holds jobs' ExcNodeLists as slurmctld would: edited only while
// pending, lists with host ranges expanded by Hostnames.
type fakeSlurm struct {
	mu         sync.Mutex
	lists      map[uint32]string
	running    map[uint32]bool
	sets       []string
	requeueErr error
	requeued   chan uint32
	cancelled  []uint32
}

func newFakeSlurm() *fakeSlurm {
	return &fakeSlurm{lists: map[uint32]string{}, running: map[uint32]bool{}, requeued: make(chan uint32, 16)}
}

func (f *fakeSlurm) Requeue(_ context.Context, job uint32) error {
	f.requeued <- job
	if f.requeueErr != nil {
		return f.requeueErr
	}
	f.mu.Lock()
	f.running[job] = false
	f.mu.Unlock()
	return nil
}

func (f *fakeSlurm) Cancel(_ context.Context, job uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, job)
	return nil
}

func (f *fakeSlurm) ExcNodeList(_ context.Context, job uint32) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists[job], !f.running[job], nil
}

func (f *fakeSlurm) SetExcNodeList(_ context.Context, job uint32, list string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[job] {
		return fmt.Errorf("%w: job %d", slurmcmd.ErrJobNotPending, job)
	}
	f.lists[job] = list
	f.sets = append(f.sets, fmt.Sprintf("%d=%s", job, list))
	return nil
}

func (f *fakeSlurm) Hostnames(_ context.Context, list string) ([]string, error) {
	// Only the forms the tests use: names and "p[a-b]", comma-separated.
	var out []string
	for _, part := range strings.Split(list, ",") {
		pre, rng, ok := strings.Cut(strings.TrimSuffix(part, "]"), "[")
		if !ok {
			out = append(out, part)
			continue
		}
		var a, b int
		if _, err := fmt.Sscanf(rng, "%d-%d", &a, &b); err != nil {
			return nil, fmt.Errorf("unexpected list %q", list)
		}
		for i := a; i <= b; i++ {
			out = append(out, fmt.Sprintf("%s%d", pre, i))
		}
	}
	return out, nil
}

func (f *fakeSlurm) list(job uint32) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists[job]
}

// drain runs every queued request through the requeuer's steps.
func drain(t *testing.T, c *testCore, sj *fakeSlurm) []requeueRequest {
	t.Helper()
	var got []requeueRequest
	for {
		select {
		case r := <-c.intro.queue:
			got = append(got, r)
			if !r.exclude {
				if err := sj.Requeue(context.Background(), r.job); err != nil {
					t.Fatal(err)
				}
				<-sj.requeued
			}
			if err := c.applyExclusion(context.Background(), sj, r.job); err != nil {
				t.Fatal(err)
			}
		default:
			return got
		}
	}
}

// revertOnce has the guest of runPair's pair (owner's host, mallory's
// guest, 10 → 5 iterations/s) reverted once, its requeue carried out
// against sj: the guest is pinned off the host's node n1.
func revertOnce(t *testing.T, c *testCore, sj *fakeSlurm) {
	t.Helper()
	got := runPair(t, c, owner, mallory, 10, 5)
	if len(got) != 1 {
		t.Fatalf("requeues %+v, want one", got)
	}
	c.intro.queue <- got[0]
	drain(t, c, sj)
}

// judgeBesideHost runs the two passes that judge waiting guests against
// host (job 1 of owner on n1's GPU g0, measured at 90%): the first sees
// them, the second has the host's report. It returns the second pass's
// decisions.
func judgeBesideHost(c *testCore, host Job, guests ...Job) []Job {
	snaps := append([]Job{host}, guests...)
	pass(c, 1000, snaps...)
	c.ReportGPUUse(shardReport(1005, 1, owner, "g0", 1, 90, 10))
	return pass(c, 1010, snaps...)
}

type askedModel string

func (m askedModel) ModelKey() string { return string(m) }

func waitingGuestJob(id, uid uint32, model string) Job {
	s := Job{ID: id, State: Pending, WaitingSince: 900, User: uid, Partition: "opp", GPUShare: true, Asked: askedModel(model)}
	return s
}

// hostOn is a guaranteed shard job on a one-GPU node.
func hostOn(id uint32, model string) Job {
	s := shardJob(id, owner, "gpu", model)
	s.NodeGPUs, s.OneNode = 1, true
	return s
}

// seededCore is introCore with Gavel's V100 seeds.
func seededCore(t *testing.T, buf *bytes.Buffer) *testCore {
	t.Helper()
	c := introCore(t, buf)
	c.cfg.Sharing.PairTable = filepath.Dir(refdata.Path(t, "gavel/colocated.csv"))
	c.cfg.Sharing.PairTableGPU = "v100"
	c.seedPairTable()
	return c
}

// ResNet-50 is predicted at 0.52 of alone beside ResNet-18 (Gavel, V100),
// LM/bs80 at full speed: the first is kept off the host's only GPU's
// node, with its reason, the second is not and ranks first.
func TestAWaitingGuestPredictedToSlowTheOnlyHostOfANodeIsKeptOffIt(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	bad := waitingGuestJob(2, mallory, "ResNet-50/bs64")
	good := waitingGuestJob(3, mallory, "lm/bs80")
	sj.lists[2] = "u[1-2]" // the user's own list
	judgeBesideHost(c, host, bad, good)
	drain(t, c, sj)
	if got := sj.list(2); got != "u[1-2],n1" {
		t.Fatalf("bad guest's ExcNodeList %q, want the user's u[1-2] and n1", got)
	}
	if got := sj.list(3); got != "" {
		t.Fatalf("good guest's ExcNodeList %q, want untouched", got)
	}
	if !strings.Contains(buf.String(), "job 2 kept off node n1: beside job 1 (model resnet-18/bs64) the pair is predicted to run it at 52% of its speed alone") {
		t.Fatalf("log lacks the reason:\n%s", buf.String())
	}
	// The next pass ranks with the scores: the good guest first (the
	// core's TestStrictTheGuestWithTheBetterPredictedPairRanksFirst, under the strict rule).
	if !(c.pairScores[3] > c.pairScores[2]) || c.pairScores[3] < 0.95 {
		t.Fatalf("good guest's pair score %v, bad's %v: want the good pair first", c.pairScores[3], c.pairScores[2])
	}
	pass(c, 1020, host, bad, good)
	if got := drain(t, c, sj); len(got) != 0 {
		t.Fatalf("an unchanged exclusion was sent again: %+v", got)
	}
	// The host ends: the node is lifted, the user's list restored verbatim.
	pass(c, 1030, bad, good)
	drain(t, c, sj)
	if got := sj.list(2); got != "u[1-2]" {
		t.Fatalf("after the host ended ExcNodeList %q, want the user's own u[1-2] exactly", got)
	}
	if !strings.Contains(buf.String(), "job 2 may run on node n1 again") {
		t.Fatalf("log lacks the lift:\n%s", buf.String())
	}
}

// A node with a GPU the guest may use stays open; one whose other GPU is
// held whole does not.
func TestAGuestIsKeptOffANodeOnlyWhenEveryGPUThereIsTaken(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	host := shardJob(1, owner, "gpu", "resnet-18/bs64")
	host.NodeGPUs, host.OneNode = 2, true
	bad := waitingGuestJob(2, mallory, "resnet-50/bs64")
	judgeBesideHost(c, host, bad)
	if got := drain(t, c, newFakeSlurm()); len(got) != 0 {
		t.Fatalf("kept off a node with an idle GPU: %+v", got)
	}
	whole := runningAs(4, owner)
	whole.NodeGPUs, whole.OneNode = 2, true
	pass(c, 1020, host, bad, whole)
	c.ReportGPUUse(shardReport(1025, 4, owner, "g1", 1, 90, 10))
	pass(c, 1030, host, bad, whole)
	if got := drain(t, c, newFakeSlurm()); len(got) != 1 || !sameRequest(got[0], requeueRequest{job: 2, exclude: true}) {
		t.Fatalf("exclusions %+v, want job 2's once the node's other GPU is held whole", got)
	}
}

// A revert pins its guest off the host's node on top of the user's own
// list; the user's list is never lost, and comes back exactly once the
// host has ended. A job that is running is not edited (Slurm refuses),
// and is sent again once it waits.
func TestARevertedGuestsExclusionJoinsTheUsersListAndIsLiftedWhenTheHostEnds(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	sj.lists[2] = "u9"
	revertOnce(t, c, sj)
	if l := sj.list(2); l != "u9,n1" {
		t.Fatalf("ExcNodeList %q, want the user's u9 and n1", l)
	}
	host := shardJob(1, owner, "gpu", "resnet")
	guest := waitingGuestJob(2, mallory, "lstm")
	pass(c, 1100, host, guest)
	if got := drain(t, c, sj); len(got) != 0 {
		t.Fatalf("sent again while nothing changed: %+v", got)
	}
	// The user edits their own list meanwhile: kept.
	sj.lists[2] = "u9,u7,n1"
	pass(c, 1110, guest)
	drain(t, c, sj)
	if l := sj.list(2); l != "u7,u9" {
		t.Fatalf("after the host ended ExcNodeList %q, want the user's u7,u9", l)
	}
	if !strings.Contains(buf.String(), "job 2 kept off node n1: introspection requeued it from there") {
		t.Fatalf("log lacks the reason:\n%s", buf.String())
	}
}

func TestAnExclusionThatFindsTheJobRunningIsSentAgainWhenItWaits(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	bad := waitingGuestJob(2, mallory, "resnet-50/bs64")
	judgeBesideHost(c, host, bad)
	sj.running[2] = true // started before the update landed
	drain(t, c, sj)
	sj.running[2] = false
	pass(c, 1020, host, bad)
	drain(t, c, sj)
	if l := sj.list(2); l != "n1" {
		t.Fatalf("ExcNodeList %q, want n1 sent again", l)
	}
}

func TestAMissingOrHostilePairTableLeavesItEmptyAndSaysWhy(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	os.Mkdir(big, 0o755)
	os.WriteFile(filepath.Join(big, "throughputs.csv"), bytes.Repeat([]byte("x,"), maxGavelFile), 0o644)
	os.WriteFile(filepath.Join(big, "colocated.csv"), []byte("a\n"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	os.Mkdir(fifo, 0o755)
	if err := syscall.Mkfifo(filepath.Join(fifo, "throughputs.csv"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, want string }{
		{"a missing directory", filepath.Join(dir, "none"), "its file cannot be read"},
		{"a file over the bound", big, "its files were refused"},
		{"a FIFO instead of a file (would block a read)", fifo, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			c := introCore(t, &buf)
			defer c.Close()
			c.cfg.Sharing.PairTable, c.cfg.Sharing.PairTableGPU = tc.dir, "v100"
			c.seedPairTable()
			if n := c.intro.table.Len(); n != 0 {
				t.Fatalf("%d pairs, want an empty table", n)
			}
			if !strings.Contains(buf.String(), "pair table not seeded") || !strings.Contains(buf.String(), tc.want) {
				t.Fatalf("log does not say why:\n%s", buf.String())
			}
		})
	}
	t.Run("Gavel's files seed it, under the jobs' lower-case keys", func(t *testing.T) {
		var buf bytes.Buffer
		c := seededCore(t, &buf)
		defer c.Close()
		if _, _, ok := c.intro.table.Lookup("resnet-18/bs64", "resnet-50/bs64"); !ok {
			t.Fatal("the seeded table lacks resnet-18/bs64 × resnet-50/bs64")
		}
	})
}

// BenchmarkExcludeBadPairs is the pass's step on a large shared cluster:
// 1,000 nodes of 4 GPUs, a guaranteed shard job of a Gavel model on every
// GPU, and the most waiting opportunistic jobs judged (1,024, of 26
// models), nothing changed since the last pass. It runs under
// slurmctld's job write lock.
func BenchmarkExcludeBadPairs(b *testing.B) {
	c := openCoreB(b)
	defer c.Close()
	c.cfg.Sharing.PairTable = filepath.Dir(refdata.Path(b, "gavel/colocated.csv"))
	c.cfg.Sharing.PairTableGPU = "v100"
	c.seedPairTable()
	u := &c.use
	c.mu.Lock()
	u.init()
	c.intro.init()
	models := c.intro.table.Models()
	u.pass = 1
	now := int64(1000)
	id := uint32(1)
	for n := 0; n < 1000; n++ {
		node := fmt.Sprintf("n%d", n)
		for g := 0; g < 4; g++ {
			u.live[id] = liveJob{uid: owner, pass: 1, running: true, model: sharing.ModelKey(models[int(id)%len(models)]),
				gpuShare: true, oneNode: true, nodeGPUs: 4}
			u.jobs[id] = &jobGPUUse{rates: introRates{node: node, gpus: []string{fmt.Sprintf("%s-g%d", node, g)}, at: now}}
			id++
		}
	}
	for k := 0; k < maxWaitingGuests; k++ {
		c.intro.waiting[id] = waitingGuest{model: sharing.ModelKey(models[k%len(models)]), pass: 1}
		id++
	}
	c.mu.Unlock()
	// The first pass logs and sends every exclusion; the steady state
	// (nothing changed) is what every later pass pays.
	for range 2 {
		c.mu.Lock()
		c.excludeBadPairs(now, c.pairScores)
		c.mu.Unlock()
		for len(c.intro.queue) > 0 {
			<-c.intro.queue
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.mu.Lock()
		c.excludeBadPairs(now, c.pairScores)
		c.mu.Unlock()
		b.StopTimer()
		for len(c.intro.queue) > 0 {
			<-c.intro.queue
		}
		b.StartTimer()
	}
}

func TestAJobsExcNodeListIsReadBoundedAndExpanded(t *testing.T) {
	sj := newFakeSlurm()
	for _, tc := range []struct {
		name, list string
		want       []string
		err        bool
	}{
		{"Slurm's (null) is no node", "(null)", nil, false},
		{"a range is expanded by Slurm's own hostlist, sorted without repeats", "u[1-2],a1,u1", []string{"a1", "u1", "u2"}, false},
		{"a list over 8 KiB is left alone", strings.Repeat("n1,", maxExcludedList/3+1), nil, true},
		{"a list of more than 2,048 nodes is left alone", "u[1-3000]", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expandNodes(context.Background(), sj, tc.list)
			if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("expandNodes(%.40q) = %v, %v; want %v, error %v", tc.list, got, err, tc.want, tc.err)
			}
		})
	}
}

// More waiting models than a pass judges: a guest left for a later pass
// keeps its exclusion rather than losing it.
func TestAGuestNotJudgedInAPassKeepsItsExclusion(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	snaps := []Job{host, waitingGuestJob(2, mallory, "resnet-50/bs64")}
	judgeBesideHost(c, snaps[0], snaps[1:]...)
	drain(t, c, sj)
	if sj.list(2) != "n1" {
		t.Fatalf("ExcNodeList %q, want n1", sj.list(2))
	}
	for k := 0; k < 2*maxGuestModels; k++ {
		snaps = append(snaps, waitingGuestJob(uint32(100+k), mallory, fmt.Sprintf("model-%d", k)))
	}
	for p := int64(0); p < 5; p++ {
		c.ReportGPUUse(shardReport(1015+10*p, 1, owner, "g0", 1, 90, 10))
		pass(c, 1020+10*p, snaps...)
		drain(t, c, sj)
		if sj.list(2) != "n1" {
			t.Fatalf("pass %d: ExcNodeList %q, want n1 kept", p, sj.list(2))
		}
	}
}

// Slurm holds a job that its ExcNodeList leaves no node (priority 0,
// FAIL_BAD_CONSTRAINTS). The guest still waits for its host to end: its
// exclusion stays, with no update per pass, and is lifted once the host
// has ended (seen on the loopback cluster: lifted and set again at every
// other pass).
func TestAGuestSlurmHoldsForItsExclusionKeepsItUntilTheHostEnds(t *testing.T) {
	var buf bytes.Buffer
	c := introCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	revertOnce(t, c, sj)
	host := shardJob(1, owner, "gpu", "resnet")
	held := waitingGuestJob(2, mallory, "lstm")
	held.Held = true
	for now := int64(1100); now < 1110; now++ {
		pass(c, now, host, held)
		if got := drain(t, c, sj); len(got) != 0 {
			t.Fatalf("pass at %d sent %+v while the host still runs", now, got)
		}
	}
	if l := sj.list(2); l != "n1" || strings.Contains(buf.String(), "may run on node") {
		t.Fatalf("ExcNodeList %q, want n1 kept; log:\n%s", l, buf.String())
	}
	pass(c, 1120, held) // the host has ended
	drain(t, c, sj)
	if l := sj.list(2); l != "" {
		t.Fatalf("after the host ended ExcNodeList %q, want it lifted", l)
	}
}

// Issue 34 item 3, the exclusion's side: a pair one party (a host of
// owner's, a guest of mallory's) marked bad keeps mallory's waiting guest
// of that model off the node of owner's host, and nobody else's; a pair
// nobody measured is judged by its seed for every owner.
func TestABadMarkKeepsOffOnlyTheGuestsOfTheUsersWhoMeasuredIt(t *testing.T) {
	const now = 5000
	tab := sharing.NewTable(sharing.Limits{})
	if err := tab.Seed("resnet", "lstm", 0.99, 0.9); err != nil {
		t.Fatal(err)
	}
	if err := tab.MarkBadBy(party(owner, mallory), now-10, "resnet", "lstm"); err != nil {
		t.Fatal(err)
	}
	occ := []nodeUse{{name: "n1", gpus: 1, shared: [][]pairHost{{{id: 1, uid: owner, model: "resnet"}}}}}
	rules := sharing.DefaultConfig()
	if v := judgeGuest(rules, tab, now, guestKind{model: "lstm", uid: mallory}, occ); v.excluded["n1"] == "" {
		t.Fatalf("the measuring party's guest is not kept off n1: %+v", v)
	}
	if v := judgeGuest(rules, tab, now, guestKind{model: "lstm", uid: 1003}, occ); len(v.excluded) != 0 || v.score != 0.99 {
		t.Fatalf("another user's guest: %+v; want it on n1 by the seed (score 0.99)", v)
	}
	other := []nodeUse{{name: "n2", gpus: 1, shared: [][]pairHost{{{id: 2, uid: 1004, model: "resnet"}}}}}
	if v := judgeGuest(rules, tab, now, guestKind{model: "lstm", uid: mallory}, other); len(v.excluded) != 0 {
		t.Fatalf("the measuring guest's user beside another user's host: %+v; want the seed", v)
	}
}

// The core's own reason (Job.KeepOff: a quota borrower kept off owners'
// idle nodes) joins a judged guest's nodes in one ExcNodeList beside the
// user's; when the core no longer keeps it off, only that node is lifted.
func TestAGuestsKeepOffJoinsItsJudgedNodesAndIsLiftedAlone(t *testing.T) {
	var buf bytes.Buffer
	c := seededCore(t, &buf)
	defer c.Close()
	sj := newFakeSlurm()
	host := hostOn(1, "resnet-18/bs64")
	bad := waitingGuestJob(2, mallory, "ResNet-50/bs64")
	bad.KeepOff = map[string]string{"q1": "an idle quota cell of account own"}
	sj.lists[2] = "u1"
	judgeBesideHost(c, host, bad)
	drain(t, c, sj)
	if got := sj.list(2); got != "u1,n1,q1" {
		t.Fatalf("ExcNodeList %q, want the user's u1, the judged n1 and the core's q1", got)
	}
	if !strings.Contains(buf.String(), "an idle quota cell of account own") {
		t.Fatalf("log lacks the core's reason:\n%s", buf.String())
	}
	bad.KeepOff = nil
	pass(c, 1020, host, bad)
	drain(t, c, sj)
	if got := sj.list(2); got != "u1,n1" {
		t.Fatalf("after the core's reason ended ExcNodeList %q, want u1,n1", got)
	}
}
