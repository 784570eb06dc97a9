package gpushare

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// memOn is a job's memory sample on node n1's GPU gpu of an 80 GiB GPU
// (81920 MiB) shared by sharers jobs.
func memOn(gpu string, usedMB float64, sharers int) memSample {
	return memSample{node: "n1", uuid: gpu, usedMB: usedMB, totalMB: 81920, sharers: sharers}
}

// With the default 10% headroom (8192 MiB), a host whose peak is 60000
// MiB leaves 13728 MiB to its guests.
// grown is m having grown by mb since the last pass.
func grown(m memMember, mb float64) memMember {
	m.grewMB = mb
	return m
}

func TestJudgeMemory(t *testing.T) {
	cfg := sharing.Config{GuestMemoryHeadroomPct: sharing.DefaultGuestMemoryHeadroomPct}
	host := func(id uint32, peak, now float64) memMember {
		return memMember{id: id, peakMB: peak, s: memOn("g0", now, 2)}
	}
	guest := func(id uint32, now float64) memMember {
		return memMember{id: id, opportunistic: true, s: memOn("g0", now, 2)}
	}
	unknownTotal := guest(2, 30000)
	unknownTotal.s.totalMB = 0
	hostUnknownTotal := host(1, 60000, 60000)
	hostUnknownTotal.s.totalMB = 0
	elsewhere := guest(2, 30000)
	elsewhere.s.uuid = "g1"
	otherNode := guest(2, 30000)
	otherNode.s.node = "n2"
	cases := []struct {
		name     string
		members  []memMember
		requeued []memVerdict // guest, host, guestMB, roomMB, reason compared
		fits     []uint32
	}{
		{"a guest within the room is kept",
			[]memMember{host(1, 60000, 60000), guest(2, 4096)}, nil, []uint32{2}},
		{"a guest that grew past the room goes",
			[]memMember{host(1, 60000, 60000), guest(2, 20000)},
			[]memVerdict{{guest: 2, host: 1, guestMB: 20000, roomMB: 13728, reason: memOverRoom}}, nil},
		{"the host's earlier peak counts, not only its use now",
			[]memMember{host(1, 70000, 40000), guest(2, 20000)},
			[]memVerdict{{guest: 2, host: 1, guestMB: 20000, roomMB: 3728, reason: memOverRoom}}, nil},
		{"a host that grew until host and guest near the GPU's total: the guest goes",
			[]memMember{host(1, 60000, 72000), guest(2, 8000)},
			[]memVerdict{{guest: 2, host: 1, guestMB: 8000, roomMB: 1728, reason: memOverRoom}}, nil},
		{"a host that grew to the GPU's total less the headroom leaves no room",
			[]memMember{host(1, 60000, 75000), guest(2, 4096)},
			[]memVerdict{{guest: 2, host: 1, guestMB: 4096, roomMB: 0, reason: memNoRoom}}, nil},
		{"two guests over together: the largest goes, the other fits",
			[]memMember{host(1, 60000, 60000), guest(2, 9000), guest(3, 8000)},
			[]memVerdict{{guest: 2, host: 1, guestMB: 9000, roomMB: 13728, reason: memOverRoom}}, []uint32{3}},
		// Issue 34 item 4: a small guest grows just past the room; the
		// largest used to be charged for it.
		{"two guests over together: the one that grew goes, not the larger one beside it",
			[]memMember{host(1, 60000, 60000), guest(2, 9000), grown(guest(3, 5000), 1000)},
			[]memVerdict{{guest: 3, host: 1, guestMB: 5000, roomMB: 13728, reason: memOverRoom}}, []uint32{2}},
		{"two guests grew: the one that grew most goes",
			[]memMember{host(1, 60000, 60000), grown(guest(2, 9000), 200), grown(guest(3, 5000), 1000)},
			[]memVerdict{{guest: 3, host: 1, guestMB: 5000, roomMB: 13728, reason: memOverRoom}}, []uint32{2}},
		{"two guaranteed jobs' peaks are summed",
			[]memMember{host(1, 25000, 25000), host(4, 35000, 35000), guest(2, 20000)},
			[]memVerdict{{guest: 2, host: 4, guestMB: 20000, roomMB: 13728, reason: memOverRoom}}, nil},
		{"the GPU's memory unknown (an older agent): not judged",
			[]memMember{hostUnknownTotal, unknownTotal}, nil, nil},
		{"guests alone on a GPU: no guaranteed job to protect",
			[]memMember{guest(2, 80000), guest(3, 80000)}, nil, nil},
		{"two guaranteed jobs: never requeued, whatever they hold",
			[]memMember{host(1, 80000, 80000), host(2, 80000, 80000)}, nil, nil},
		{"a guest on another GPU is not the host's neighbour",
			[]memMember{host(1, 80000, 80000), elsewhere}, nil, nil},
		{"a guest on the same uuid on another node is not the host's neighbour",
			[]memMember{host(1, 80000, 80000), otherNode}, nil, nil},
		{"a guest whose last sample has the GPU alone is not judged",
			[]memMember{host(1, 80000, 80000), {id: 2, opportunistic: true, s: memOn("g0", 30000, 1)}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, fits := judgeMemory(cfg, tc.members)
			if len(got) != len(tc.requeued) {
				t.Fatalf("requeued %+v, want %+v", got, tc.requeued)
			}
			for i, w := range tc.requeued {
				g := got[i]
				if g.guest != w.guest || g.host != w.host || g.guestMB != w.guestMB || g.roomMB != w.roomMB || g.reason != w.reason ||
					g.node != "n1" || g.uuid != "g0" {
					t.Fatalf("requeued %+v, want %+v", g, w)
				}
			}
			if len(fits) != len(tc.fits) {
				t.Fatalf("fits %+v, want guests %v", fits, tc.fits)
			}
			for i, id := range tc.fits {
				if fits[i].guest != id {
					t.Fatalf("fits %+v, want guests %v", fits, tc.fits)
				}
			}
		})
	}
}

// memReport is node n1's report at t of one job on fake GPU g0 (81920
// MiB) holding usedMB.
func memReport(t int64, job, uid uint32, usedMB float64) *wire.JobUsageReport {
	return &wire.JobUsageReport{Node: "n1", At: time.Unix(t, 0), IntervalSec: 10, Jobs: []wire.JobUsage{{JobID: job, UID: uid,
		GPUs: []wire.JobGPUUsage{{UUID: "g0", UtilPct: 50, MemUsedMB: usedMB, MemTotalMB: 81920, Sharers: 2}}}}}
}

// memGuardCore is introCore with the memory bound's default 10%
// headroom: beside a host at 60000 MiB of an 81920 MiB GPU, a guest has
// 13728 MiB of room.
func memGuardCore(t *testing.T, buf *bytes.Buffer) *testCore {
	t.Helper()
	c := introCore(t, buf)
	c.cfg.Sharing.Rules.GuestMemoryHeadroomPct = 10
	return c
}

// memHostAndGuest is the pair the memory bound judges: owner's guaranteed
// job 1 (resnet) and mallory's opportunistic job 2 (lstm) on shards.
func memHostAndGuest() (host, guest Job) {
	return shardJob(1, owner, "gpu", "resnet"), shardJob(2, mallory, "opp", "lstm")
}

func drainRequeues(c *testCore) []requeueRequest {
	var got []requeueRequest
	for {
		select {
		case r := <-c.intro.queue:
			got = append(got, r)
			if r.requeued != nil {
				r.requeued() // as the requeuer does once Slurm requeued it
			}
		default:
			return got
		}
	}
}

// The core's half: a guest within the room is kept (and logged so once);
// the pass after it grows past the room requeues it through
// introspection's requeuer, kept off the node, logged with the figures
// and counted; it is asked once; the guaranteed job is never requeued.
func TestAGuestThatGrowsPastItsMemoryRoomIsRequeuedWithinAPass(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	host, guest := memHostAndGuest()
	pass(c, 1000, host, guest)
	c.ReportGPUUse(memReport(1010, 1, owner, 60000))
	c.ReportGPUUse(memReport(1010, 2, mallory, 4096))
	pass(c, 1020, host, guest)
	pass(c, 1030, host, guest)
	if got := drainRequeues(c); len(got) != 0 {
		t.Fatalf("requeues %+v of a guest within the room", got)
	}
	fits := "job 2 fits beside job 1 on GPU g0: its GPU memory 4096 MiB is within the room its neighbour leaves (13728 MiB)"
	if n := strings.Count(buf.String(), fits); n != 1 {
		t.Fatalf("the fit is logged %d times, want once:\n%s", n, buf.String())
	}

	c.ReportGPUUse(memReport(1040, 1, owner, 60000))
	c.ReportGPUUse(memReport(1040, 2, mallory, 20000))
	pass(c, 1050, host, guest)
	if got := drainRequeues(c); len(got) != 1 || !sameRequest(got[0], requeueRequest{job: 2, node: "n1"}) {
		t.Fatalf("requeues %+v, want job 2 off n1", got)
	}
	line := "job 2 requeued: its GPU memory 20000 MiB on GPU g0 exceeds the room its neighbour job 1 leaves (13728 MiB)"
	if !strings.Contains(buf.String(), line) || !strings.Contains(buf.String(), "reason="+memOverRoom) {
		t.Fatalf("log lacks the requeue line:\n%s", buf.String())
	}
	if n := testutil.ToFloat64(c.met.memRequeues.WithLabelValues(memOverRoom)); n != 1 {
		t.Fatalf("%s{reason=%q} = %v, want 1", MetricMemoryRequeues, memOverRoom, n)
	}
	// Asked once: the guest still runs (Slurm has not requeued it yet).
	pass(c, 1060, host, guest)
	if got := drainRequeues(c); len(got) != 0 {
		t.Fatalf("asked again: %+v", got)
	}
}

// A host whose own memory grows until host and guest near the GPU's
// total makes the guest go (the host is guaranteed), even a guest that
// did not grow.
func TestAHostThatGrowsPushesItsGuestOut(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	host, guest := memHostAndGuest()
	pass(c, 1000, host, guest)
	c.ReportGPUUse(memReport(1010, 1, owner, 40000))
	c.ReportGPUUse(memReport(1010, 2, mallory, 8000))
	pass(c, 1020, host, guest)
	if got := drainRequeues(c); len(got) != 0 {
		t.Fatalf("requeues %+v of a guest within the room", got)
	}
	c.ReportGPUUse(memReport(1030, 1, owner, 72000))
	c.ReportGPUUse(memReport(1030, 2, mallory, 8000))
	pass(c, 1040, host, guest)
	if got := drainRequeues(c); len(got) != 1 || got[0].job != 2 {
		t.Fatalf("requeues %+v, want the guest, job 2", got)
	}
	line := "job 2 requeued: its GPU memory 8000 MiB on GPU g0 exceeds the room its neighbour job 1 leaves (1728 MiB)"
	if !strings.Contains(buf.String(), line) {
		t.Fatalf("log lacks the requeue line:\n%s", buf.String())
	}
}

// Hostile: the figures are the agent's, checked by ReportGPUUse. A guest's
// owner cannot report the host's job as bigger (the entry is dropped:
// wrong_user) to make room look smaller for someone else, and no report
// gets a guaranteed job requeued, however much memory it holds.
func TestMemoryReportsCannotRequeueBeyondTheRule(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	a, b := shardJob(1, owner, "gpu", "resnet"), shardJob(2, mallory, "gpu", "lstm")
	guest := shardJob(3, 1003, "opp", "lstm")
	pass(c, 1000, a, b, guest)
	c.ReportGPUUse(memReport(1010, 1, owner, 80000))
	c.ReportGPUUse(memReport(1010, 2, mallory, 80000))
	c.ReportGPUUse(memReport(1010, 3, mallory, 1)) // mallory for another user's guest: dropped
	pass(c, 1020, a, b, guest)
	if got := drainRequeues(c); len(got) != 0 {
		t.Fatalf("requeues %+v: only an opportunistic job with its own measured memory may be requeued", got)
	}
}

// One pass, one word per guest: a guest the memory bound requeues is not
// also logged as kept by introspection, though its neighbour ran within
// max_slowdown beside it.
func TestAGuestRequeuedForItsMemoryIsNotAlsoReportedKept(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	report := func(at int64, job, uid uint32, sharers int, iters, memMB float64) *wire.JobUsageReport {
		r := shardReport(at, job, uid, "g0", sharers, 60, iters)
		r.Jobs[0].GPUs[0].MemUsedMB, r.Jobs[0].GPUs[0].MemTotalMB = memMB, 81920
		return r
	}
	host, guest := memHostAndGuest()
	pass(c, 1000, host)
	for k := int64(1); k <= 3; k++ {
		c.ReportGPUUse(report(1000+10*k, 1, owner, 1, 10, 60000))
	}
	pass(c, 1040, host, guest)
	for k := int64(5); k <= 8; k++ {
		c.ReportGPUUse(report(1000+10*k, 1, owner, 2, 9.9, 60000))
		c.ReportGPUUse(report(1000+10*k, 2, mallory, 2, 3, 20000))
	}
	pass(c, 1090, host, guest)
	if got := drainRequeues(c); len(got) != 1 || !sameRequest(got[0], requeueRequest{job: 2, node: "n1"}) {
		t.Fatalf("requeues %+v, want job 2 off n1 for its memory", got)
	}
	if !strings.Contains(buf.String(), "job 2 requeued: its GPU memory 20000 MiB") {
		t.Fatalf("log lacks the memory requeue:\n%s", buf.String())
	}
	pass(c, 1100, host, guest) // still running: Slurm has not requeued it yet
	if strings.Contains(buf.String(), "job 2 kept:") {
		t.Fatalf("the requeued guest is also logged kept:\n%s", buf.String())
	}
}

// unaccountedOn is node n1's report at t of a host on g0 beside GPU use
// of uid that no job accounts for.
func unaccountedOn(t int64, host, hostUID uint32, hostMB float64, uid uint32, hiddenMB float64) *wire.JobUsageReport {
	rep := memReport(t, host, hostUID, hostMB)
	rep.Unaccounted = []wire.UnaccountedGPUUse{{UUID: "g0", UID: uid, MemUsedMB: hiddenMB, MemTotalMB: 81920, Processes: 1}}
	return rep
}

// Issue 34 item 1: a guest whose GPU process left its step's process tree
// reports nothing of its own; its agent reports the process's use as no
// job's, under its uid. Within the room it is kept; grown past it, the
// guest of that uid that hides (seen on no GPU) is requeued within a
// pass, kept off the node, and the log says the memory was no job's.
// Before, only the host's report reached the pass, saying it was alone.
func TestAGuestWhoseProcessLeftItsStepIsStillBounded(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	host, guest := memHostAndGuest()
	pass(c, 1000, host, guest)
	c.ReportGPUUse(unaccountedOn(1010, 1, owner, 60000, mallory, 4096))
	pass(c, 1020, host, guest)
	if got := drainRequeues(c); len(got) != 0 {
		t.Fatalf("requeues %+v of a hidden guest within the room", got)
	}
	c.ReportGPUUse(unaccountedOn(1030, 1, owner, 60000, mallory, 20000))
	pass(c, 1040, host, guest)
	if got := drainRequeues(c); len(got) != 1 || got[0].job != 2 || got[0].node != "n1" {
		t.Fatalf("requeues %+v, want job 2 off n1", got)
	}
	line := "job 2 requeued: its GPU memory 20000 MiB on GPU g0 exceeds the room its neighbour job 1 leaves (13728 MiB)"
	charged := "job 2 charged 20000 MiB of GPU memory on GPU g0 that its user's processes outside every job hold"
	if !strings.Contains(buf.String(), line) || !strings.Contains(buf.String(), charged) {
		t.Fatalf("log lacks the requeue line:\n%s", buf.String())
	}
}

// Unaccounted use of a user with no guest (an administrator's process)
// is nobody's to requeue, but it takes the guests' room: a guest that fit
// beside the host alone no longer does. A report without it clears it;
// one that stops coming expires.
func TestUseNoGuestCouldHoldTakesTheRoom(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	host, guest := memHostAndGuest()
	pass(c, 1000, host, guest)
	rep := unaccountedOn(1010, 1, owner, 50000, 0, 20000)
	rep.Jobs = append(rep.Jobs, memReport(1010, 2, mallory, 8000).Jobs...) // one report per node
	c.ReportGPUUse(rep)
	pass(c, 1020, host, guest)
	if got := drainRequeues(c); len(got) != 1 || got[0].job != 2 {
		t.Fatalf("requeues %+v, want job 2: 8000 MiB beside 50000 + 20000 of no job's", got)
	}
	if strings.Contains(buf.String(), "outside every job") {
		t.Fatalf("the guest was charged another's use:\n%s", buf.String())
	}
	// The unaccounted use is gone from the next report: nothing stands.
	c.ReportGPUUse(memReport(1030, 1, owner, 50000))
	c.mu.Lock()
	n := len(c.use.unaccountedUse(1040))
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d unaccounted entries after a report without any", n)
	}
	c.ReportGPUUse(unaccountedOn(1050, 1, owner, 50000, 0, 10000))
	c.mu.Lock()
	n, m := len(c.use.unaccountedUse(1060)), len(c.use.unaccountedUse(1050+unaccountedFor(10)+1))
	c.mu.Unlock()
	if n != 1 || m != 0 {
		t.Fatalf("unaccounted entries: %d while fresh (want 1), %d once expired (want 0)", n, m)
	}
}

// Which guest is charged: the one of the same uid on the GPU with the
// most memory; else that user's newest guest seen on no GPU; never
// another user's guest; else nobody (id 0).
func TestChargeUnaccounted(t *testing.T) {
	host := memMember{id: 1, peakMB: 40000, s: memOn("g0", 40000, 2)}
	g := func(id uint32, mb float64) memMember {
		return memMember{id: id, opportunistic: true, s: memOn("g0", mb, 2)}
	}
	use := func(uid uint32, mb float64) []unaccountedEntry {
		return []unaccountedEntry{{node: "n1", use: wire.UnaccountedGPUUse{UUID: "g0", UID: uid, MemUsedMB: mb, MemTotalMB: 81920, Processes: 1}}}
	}
	guests := map[uint32][]userGuest{
		100: {{id: 2, seen: true}, {id: 3, seen: true}, {id: 7}, {id: 9}},
		200: {{id: 4, seen: true}},
	}
	got := chargeUnaccounted([]memMember{host, g(2, 100), g(3, 500), g(4, 9000)}, use(100, 1000), guests)
	if got[2].s.usedMB != 1500 || got[2].unaccountedMB != 1000 || got[1].s.usedMB != 100 || got[3].s.usedMB != 9000 || len(got) != 4 {
		t.Fatalf("same uid on the GPU: %+v", got)
	}
	got = chargeUnaccounted([]memMember{host, g(4, 9000)}, use(100, 1000), guests)
	if len(got) != 3 || got[2].id != 9 || !got[2].opportunistic || got[2].s.usedMB != 1000 || got[2].s.uuid != "g0" || got[1].s.usedMB != 9000 {
		t.Fatalf("the user's hiding guest: %+v", got)
	}
	got = chargeUnaccounted([]memMember{host, g(4, 9000)}, use(300, 1000), guests)
	if len(got) != 3 || got[2].id != 0 || got[2].opportunistic || got[2].s.usedMB != 1000 {
		t.Fatalf("nobody's: %+v", got)
	}
	if got := chargeUnaccounted([]memMember{host}, use(100, 0), guests); len(got) != 1 {
		t.Fatalf("no memory charged: %+v", got)
	}
}

// A guest on shares of two GPUs (Slurm 23.11+'s MULTIPLE_SHARING_GRES_PJ)
// is held to the room on each: within it beside the host of g0, over it
// beside the host of g1, it is requeued for g1's. Checked on its first GPU
// only, as before, it was kept.
func TestAGuestOfTwoGPUsIsHeldToTheRoomOnEach(t *testing.T) {
	var buf bytes.Buffer
	c := memGuardCore(t, &buf)
	defer c.Close()
	hostA, hostB, guest := shardJob(1, owner, "gpu", "resnet"), shardJob(3, owner, "gpu", "resnet"), shardJob(2, mallory, "opp", "lstm")
	pass(c, 1000, hostA, hostB, guest)
	on := func(uuid string, usedMB float64) wire.JobGPUUsage {
		return wire.JobGPUUsage{UUID: uuid, UtilPct: 50, MemUsedMB: usedMB, MemTotalMB: 81920, Sharers: 2}
	}
	at := time.Unix(1010, 0)
	for _, j := range []wire.JobUsage{
		{JobID: 1, UID: owner, GPUs: []wire.JobGPUUsage{on("g0", 60000)}},
		{JobID: 3, UID: owner, GPUs: []wire.JobGPUUsage{on("g1", 60000)}},
		{JobID: 2, UID: mallory, GPUs: []wire.JobGPUUsage{on("g0", 4096), on("g1", 20000)}},
	} {
		c.ReportGPUUse(&wire.JobUsageReport{Node: "n1", At: at, IntervalSec: 10, Jobs: []wire.JobUsage{j}})
	}
	pass(c, 1020, hostA, hostB, guest)
	if got := drainRequeues(c); len(got) != 1 || got[0].job != 2 || got[0].node != "n1" {
		t.Fatalf("requeues %+v, want job 2 off n1", got)
	}
	line := "job 2 requeued: its GPU memory 20000 MiB on GPU g1 exceeds the room its neighbour job 3 leaves (13728 MiB)"
	if !strings.Contains(buf.String(), line) {
		t.Fatalf("log lacks the requeue line for g1:\n%s", buf.String())
	}
}
