package gpushare

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// The measured memory bound of opportunistic jobs (issue 22: guests "are
// limited … so they cannot hurt" the guaranteed job beside them). Slurm's
// gres/shard fences no GPU memory: a guest can take what its host needs
// and make the host's next allocation fail. So, at every pass, for each
// GPU (node and uuid in the agents' usage reports) that guaranteed and
// opportunistic jobs share, the guests' memory together is held against
// the room the guaranteed jobs leave: the GPU's memory (the agent's
// mem_total_mb) less their measured peak less
// sharing.guest_memory_headroom_pct (sharing.Config.MemoryOver). Guests
// over it are requeued, the one that grew most since the last pass first
// (issue 34 item 4: not the largest, which a small guest growing past
// the room would otherwise get requeued) until the rest fit, by the
// requeuer introspection uses (introspect.go: scontrol outside every
// lock, kept off the node), in the pass that sees it. A host's peak
// includes its current use, so a host that grows until host and guests
// near the GPU's total makes its guests go the same way.
//
// Every figure is an agent's measurement (root on the node, NVML's
// per-process memory), checked by ReportGPUUse (the job runs, the uid
// owns it); a job's own processes say nothing about their memory.
//
// GPU memory no job accounts for counts too (issue 34 item 1): on a node
// without job cgroups, a guest's process that left its step's process
// tree (setsid, daemonised) is in no job, and its agent reports its use
// per GPU under its real uid, which the process cannot change
// (wire.UnaccountedGPUUse). On a GPU the pass judges, such use is
// charged to a guest that could hold it: the guest of that uid on that
// GPU using the most memory; where that user has no guest seen there, the
// newest of their running guests seen on no GPU at all (the hiding one
// reports nothing of its own); where the user has no running guest (an
// administrator's process, the MPS server, a host's own process outside
// its step), to nobody, but it is memory the GPU does not have, so it is
// taken from the guests' room like a host's. A guest charged for another
// of its user's guests is the user's own doing: the next pass charges
// what is still there to the next. The
// bound acts after the fact, a sampling interval late at worst; where
// CUDA MPS is configured, its per-client limit can stop the allocation
// itself, but it is an environment variable the client may override
// (docs/how-it-works.md, Limits), so this bound is the guarantee.

// Reasons a guest is requeued for memory (label of MetricMemoryRequeues).
const (
	// memOverRoom: the guests hold more than the room the guaranteed
	// jobs' measured peak leaves.
	memOverRoom = "over_room"
	// memNoRoom: the guaranteed jobs' peak leaves no room at all (it
	// reached the GPU's memory less the headroom): they need the GPU.
	memNoRoom = "no_room"
)

// MetricMemoryRequeues counts opportunistic jobs requeued for holding
// more GPU memory than the guaranteed jobs beside them leave.
const MetricMemoryRequeues = "lachesis_sharing_memory_requeues_total"

// memSample is a job's last measured use of one of its GPUs.
type memSample struct {
	node, uuid string
	index      int
	usedMB     float64
	totalMB    float64 // 0: the agent did not say
	sharers    int
}

// memSamplesOf is the memory part of one checked entry of node's report,
// one sample per GPU (at most maxTrackedGPUs; a guest on shares of
// several GPUs, Slurm 23.11+, is held to the room on each), into buf.
func memSamplesOf(buf []memSample, e *wire.JobUsage, node string) []memSample {
	buf = buf[:0]
	for _, g := range e.GPUs[:min(len(e.GPUs), maxTrackedGPUs)] {
		buf = append(buf, memSample{node: node, uuid: g.UUID, index: g.Index, usedMB: g.MemUsedMB, totalMB: g.MemTotalMB, sharers: g.Sharers})
	}
	return buf
}

// memMember is one running job on a shared GPU as the pass sees it; id
// 0 is use that no job accounts for and no guest could hold
// (chargeUnaccounted), taken from the guests' room.
type memMember struct {
	id            uint32
	opportunistic bool
	// unaccountedMB: of s.usedMB, what its user's processes outside
	// every job hold (chargeUnaccounted).
	unaccountedMB float64
	// peakMB: its measured peak (ledger.JobGPUUse.MemPeakMB: the most it
	// held on one GPU in any sample, this run or an earlier one).
	peakMB float64
	// grewMB: how much more it holds on this GPU than the last pass saw
	// (all of it for a job the last pass did not see there).
	grewMB float64
	s      memSample
}

// memVerdict is one guest judgeMemory requeues.
type memVerdict struct {
	guest, host     uint32 // host: the guaranteed job with the largest peak
	node, uuid      string
	guestMB, roomMB float64
	unaccountedMB   float64 // of guestMB, in processes of no job
	reason          string
}

// memFit is one guest judgeMemory keeps, with the room it fits in.
type memFit struct {
	guest, host     uint32
	uuid            string
	guestMB, roomMB float64
}

// judgeMemory holds the guests of every GPU shared with guaranteed jobs
// against the room those leave (cfg.MemoryOver) and says which guests go
// and which stay. Per GPU: the hosts' peaks are summed (several
// guaranteed jobs on shards of one GPU leave less between them); the
// guests go in the order they took the room, the one that grew most since
// the last pass first (a guest that came since grew by all it holds),
// ties to the larger, then to the later job id, until the rest fit. A
// guest is charged for its own growth, never for another's. A GPU
// without a guaranteed job, or whose memory the agent did not report, is
// not judged. Pure.
func judgeMemory(cfg sharing.Config, members []memMember) (out []memVerdict, fits []memFit) {
	order, groups := sharedGPUs(members, func(m memMember) (string, string, bool) {
		return m.s.node, m.s.uuid, m.s.sharers >= 2 && m.s.uuid != ""
	})
	for _, k := range order {
		var hosts, guests []memMember
		total, hostPeak, guestMB := 0.0, 0.0, 0.0
		for _, m := range groups[k] {
			total = max(total, m.s.totalMB)
			switch {
			case m.id == 0:
				hostPeak += m.s.usedMB
			case m.opportunistic:
				guests = append(guests, m)
				guestMB += m.s.usedMB
			default:
				hosts = append(hosts, m)
				hostPeak += max(m.peakMB, m.s.usedMB)
			}
		}
		if len(hosts) == 0 || len(guests) == 0 {
			continue
		}
		room := cfg.GuestMemoryRoom(total, hostPeak)
		if math.IsNaN(room) { // the GPU's memory is unknown
			continue
		}
		host := slices.MaxFunc(hosts, func(a, b memMember) int {
			return cmp.Or(cmp.Compare(max(a.peakMB, a.s.usedMB), max(b.peakMB, b.s.usedMB)), cmp.Compare(b.id, a.id))
		})
		reason := memOverRoom
		if room == 0 {
			reason = memNoRoom
		}
		slices.SortFunc(guests, func(a, b memMember) int {
			return cmp.Or(cmp.Compare(b.grewMB, a.grewMB), cmp.Compare(b.s.usedMB, a.s.usedMB), cmp.Compare(b.id, a.id))
		})
		for _, g := range guests {
			if cfg.MemoryOver(total, hostPeak, guestMB) {
				out = append(out, memVerdict{guest: g.id, host: host.id, node: k.node, uuid: k.uuid,
					guestMB: g.s.usedMB, roomMB: room, unaccountedMB: g.unaccountedMB, reason: reason})
				guestMB -= g.s.usedMB
				continue
			}
			fits = append(fits, memFit{guest: g.id, host: host.id, uuid: k.uuid, guestMB: g.s.usedMB, roomMB: room})
		}
	}
	return out, fits
}

// memGuardState is what the memory bound keeps between passes; under
// mu.
type memGuardState struct {
	// fits: the pairs (guest, host) last logged as fitting (one line per
	// pair and run, not one per pass; a guest of several GPUs has a host
	// on each).
	fits map[keptPair]bool
	// seen: each job's memory on each shared GPU as the last pass saw it
	// (grewMB's reference).
	seen map[memSeenKey]memSample
}

// memSeenKey is one job on one GPU, for memGuardState.seen.
type memSeenKey struct {
	job  uint32
	uuid string
}

// guardMemory is the pass's memory bound (Judge), called with
// mu held, before introspect: it requeues the guests over the room
// through introspection's queue (never blocking: a full queue drops the
// request and the next pass asks again).
func (c *Sharing) guardMemory(now int64) {
	u := &c.use
	in := &c.intro
	in.init()
	mg := &c.memGuard
	if mg.fits == nil {
		mg.fits = map[keptPair]bool{}
		mg.seen = map[memSeenKey]memSample{}
	}
	for p := range mg.fits {
		if l, ok := u.live[p.guest]; !ok || !l.running {
			delete(mg.fits, p)
		}
	}
	var members []memMember
	for id, l := range u.live {
		j := u.jobs[id]
		if j == nil || l.pass != u.pass || !l.running {
			continue
		}
		for _, s := range j.mem {
			if s.sharers < 2 {
				continue
			}
			k := memSeenKey{job: id, uuid: s.uuid}
			grew := s.usedMB
			if last, ok := mg.seen[k]; ok && last.node == s.node {
				grew -= last.usedMB
			}
			members = append(members, memMember{id: id, opportunistic: l.opportunistic, peakMB: j.sum.MemPeakMB, grewMB: grew, s: s})
		}
	}
	// The reference is this pass's samples only: a job that left a GPU,
	// stopped sharing it or ended comes back to it as a newcomer.
	clear(mg.seen)
	for _, m := range members {
		mg.seen[memSeenKey{job: m.id, uuid: m.s.uuid}] = m.s
	}
	members = chargeUnaccounted(members, u.unaccountedUse(now), u.guestsByUser())
	if len(members) < 2 {
		return
	}
	cfg := c.cfg.Sharing.Rules
	over, fits := judgeMemory(cfg, members)
	for _, f := range fits {
		p := keptPair{guest: f.guest, host: f.host}
		if mg.fits[p] {
			continue
		}
		mg.fits[p] = true
		c.log.Info(fmt.Sprintf("job %d fits beside job %d on GPU %s: its GPU memory %s MiB is within the room its neighbour leaves (%s MiB)",
			f.guest, f.host, f.uuid, mib(f.guestMB), mib(f.roomMB)), keyJob, f.guest, "host", f.host)
	}
	for _, v := range over {
		if in.asked[v.guest] {
			continue
		}
		if v.unaccountedMB > 0 {
			c.log.Info(fmt.Sprintf("job %d charged %s MiB of GPU memory on GPU %s that its user's processes outside every job hold (outside their step)",
				v.guest, mib(v.unaccountedMB), v.uuid), keyJob, v.guest, "node", v.node)
		}
		node := v.node
		if !slurmNodeName(node) {
			node = ""
		}
		why := fmt.Sprintf("its GPU memory %s MiB on GPU %s exceeds the room its neighbour job %d leaves (%s MiB)",
			mib(v.guestMB), v.uuid, v.host, mib(v.roomMB))
		headroom := cfg.GuestMemoryHeadroomPct
		requeued := func() { // the requeuer's, once Slurm requeued it
			c.met.memoryRequeue(v.reason)
			c.log.Info(fmt.Sprintf("job %d requeued: %s", v.guest, why),
				keyJob, v.guest, "host", v.host, "node", v.node, "reason", v.reason, "headroom_pct", headroom)
		}
		select {
		case in.queue <- requeueRequest{job: v.guest, node: node, requeued: requeued, why: why}:
			in.asked[v.guest] = true
		default:
			c.log.Warn("requeue queue full; the next pass asks again", keyJob, v.guest)
			continue
		}
		for p := range mg.fits {
			if p.guest == v.guest {
				delete(mg.fits, p)
			}
		}
		if node != "" {
			c.pinOff(v.guest, v.host, node, fmt.Sprintf("its GPU memory %s MiB exceeded the room its neighbour job %d leaves there (%s MiB)",
				mib(v.guestMB), v.host, mib(v.roomMB)), now)
		}
	}
}

func mib(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// maxUnaccountedNodes bounds the nodes whose unaccounted use is kept (a
// report from one more is not kept until one expires).
const maxUnaccountedNodes = 16384

// unaccountedReport is one node's last report of GPU use no job accounts
// for, believed until its expiry.
type unaccountedReport struct {
	until int64
	use   []wire.UnaccountedGPUUse
}

// unaccountedFor is how long a node's unaccounted use stands without a
// newer report: three of its intervals, at least a minute.
func unaccountedFor(intervalSec float64) int64 {
	return max(60, int64(3*intervalSec))
}

// noteUnaccounted keeps the unaccounted use of node's report (validated
// by the listener: at most wire.MaxUnaccounted entries); a report with
// none clears the node's. Caller holds mu.
func (u *gpuUseState) noteUnaccounted(rep *wire.JobUsageReport, at int64) {
	if len(rep.Unaccounted) == 0 {
		delete(u.unaccounted, rep.Node)
		return
	}
	if u.unaccounted == nil {
		u.unaccounted = map[string]unaccountedReport{}
	}
	if _, ok := u.unaccounted[rep.Node]; !ok && len(u.unaccounted) >= maxUnaccountedNodes {
		for n, r := range u.unaccounted {
			if r.until < at {
				delete(u.unaccounted, n)
			}
		}
		if len(u.unaccounted) >= maxUnaccountedNodes {
			return
		}
	}
	u.unaccounted[rep.Node] = unaccountedReport{until: at + unaccountedFor(rep.IntervalSec), use: rep.Unaccounted}
}

// unaccountedEntry is one node's unaccounted use of one GPU by one uid.
type unaccountedEntry struct {
	node string
	use  wire.UnaccountedGPUUse
}

// unaccountedUse is the unaccounted use still standing at now, in node
// order; expired reports are dropped. Caller holds mu.
func (u *gpuUseState) unaccountedUse(now int64) []unaccountedEntry {
	var out []unaccountedEntry
	for n, r := range u.unaccounted {
		if r.until < now {
			delete(u.unaccounted, n)
			continue
		}
		for _, g := range r.use {
			out = append(out, unaccountedEntry{node: n, use: g})
		}
	}
	slices.SortStableFunc(out, func(a, b unaccountedEntry) int { return cmp.Compare(a.node, b.node) })
	return out
}

// userGuest is a running guest as chargeUnaccounted picks among them.
type userGuest struct {
	id uint32
	// seen: it reported use of some GPU (its memory sample names one).
	seen bool
}

// guestsByUser is each user's running guests. Caller holds mu.
func (u *gpuUseState) guestsByUser() map[uint32][]userGuest {
	out := map[uint32][]userGuest{}
	for id, l := range u.live {
		if !l.running || !l.opportunistic || l.pass != u.pass {
			continue
		}
		j := u.jobs[id]
		out[l.uid] = append(out[l.uid], userGuest{id: id, seen: j != nil && slices.ContainsFunc(j.mem, func(s memSample) bool { return s.uuid != "" })})
	}
	return out
}

// chargeUnaccounted adds the use no job accounts for to the members of
// the pass's memory bound (the rule is at the top of this file): to a
// guest of the same uid on the GPU, else to the newest of that user's
// guests seen on no GPU (a member of that GPU from now on), else as a
// member of id 0, whose memory judgeMemory takes from the room. Pure.
func chargeUnaccounted(members []memMember, use []unaccountedEntry, guests map[uint32][]userGuest) []memMember {
	for _, e := range use {
		g := e.use
		if g.UUID == "" || !(g.MemUsedMB > 0) {
			continue
		}
		best := -1
		for i, m := range members {
			if m.opportunistic && m.id != 0 && m.s.node == e.node && m.s.uuid == g.UUID && guestOf(guests[g.UID], m.id) &&
				(best < 0 || cmp.Or(cmp.Compare(m.s.usedMB, members[best].s.usedMB), cmp.Compare(m.id, members[best].id)) > 0) {
				best = i
			}
		}
		if best >= 0 {
			members[best].s.usedMB += g.MemUsedMB
			members[best].unaccountedMB += g.MemUsedMB
			continue
		}
		var hiding uint32
		for _, ug := range guests[g.UID] {
			if !ug.seen && ug.id > hiding {
				hiding = ug.id
			}
		}
		s := memSample{node: e.node, uuid: g.UUID, index: g.Index, usedMB: g.MemUsedMB, totalMB: g.MemTotalMB, sharers: 2}
		if hiding != 0 {
			// A guest seen on no GPU may already be a member of this GPU
			// through another entry (another uid of the same user is not
			// possible; another report of the node is): add to it.
			i := slices.IndexFunc(members, func(m memMember) bool {
				return m.id == hiding && m.s.node == e.node && m.s.uuid == g.UUID
			})
			if i >= 0 {
				members[i].s.usedMB += g.MemUsedMB
				members[i].unaccountedMB += g.MemUsedMB
				continue
			}
			members = append(members, memMember{id: hiding, opportunistic: true, unaccountedMB: g.MemUsedMB, s: s})
			continue
		}
		members = append(members, memMember{id: 0, s: s})
	}
	return members
}

func guestOf(guests []userGuest, id uint32) bool {
	return slices.ContainsFunc(guests, func(g userGuest) bool { return g.id == id })
}
