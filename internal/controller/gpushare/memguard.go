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
// over it are requeued, the largest first until the rest fit, by the
// requeuer introspection uses (introspect.go: scontrol outside every
// lock, kept off the node), in the pass that sees it. A host's peak
// includes its current use, so a host that grows until host and guests
// near the GPU's total makes its guests go the same way.
//
// Every figure is an agent's measurement (root on the node, NVML's
// per-process memory), checked by ReportGPUUse (the job runs, the uid
// owns it); a job's own processes say nothing about their memory. The
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

// memMember is one running job on a shared GPU as the pass sees it.
type memMember struct {
	id            uint32
	opportunistic bool
	// peakMB: its measured peak (ledger.JobGPUUse.MemPeakMB: the most it
	// held on one GPU in any sample, this run or an earlier one).
	peakMB float64
	s      memSample
}

// memVerdict is one guest judgeMemory requeues.
type memVerdict struct {
	guest, host     uint32 // host: the guaranteed job with the largest peak
	node, uuid      string
	guestMB, roomMB float64
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
// guests go largest first (then the later job id) until the rest fit, as
// the largest is the one that took the room. A GPU without a guaranteed
// job, or whose memory the agent did not report, is not judged. Pure.
func judgeMemory(cfg sharing.Config, members []memMember) (out []memVerdict, fits []memFit) {
	order, groups := sharedGPUs(members, func(m memMember) (string, string, bool) {
		return m.s.node, m.s.uuid, m.s.sharers >= 2 && m.s.uuid != ""
	})
	for _, k := range order {
		var hosts, guests []memMember
		total, hostPeak, guestMB := 0.0, 0.0, 0.0
		for _, m := range groups[k] {
			total = max(total, m.s.totalMB)
			if m.opportunistic {
				guests = append(guests, m)
				guestMB += m.s.usedMB
			} else {
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
			return cmp.Or(cmp.Compare(b.s.usedMB, a.s.usedMB), cmp.Compare(b.id, a.id))
		})
		for _, g := range guests {
			if cfg.MemoryOver(total, hostPeak, guestMB) {
				out = append(out, memVerdict{guest: g.id, host: host.id, node: k.node, uuid: k.uuid,
					guestMB: g.s.usedMB, roomMB: room, reason: reason})
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
			if s.sharers >= 2 {
				members = append(members, memMember{id: id, opportunistic: l.opportunistic, peakMB: j.sum.MemPeakMB, s: s})
			}
		}
	}
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
		node := v.node
		if !slurmNodeName(node) {
			node = ""
		}
		select {
		case in.queue <- requeueRequest{job: v.guest, node: node}:
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
		c.met.memoryRequeue(v.reason)
		c.log.Info(fmt.Sprintf("job %d requeued: its GPU memory %s MiB on GPU %s exceeds the room its neighbour job %d leaves (%s MiB)",
			v.guest, mib(v.guestMB), v.uuid, v.host, mib(v.roomMB)),
			keyJob, v.guest, "host", v.host, "node", v.node, "reason", v.reason,
			"headroom_pct", cfg.GuestMemoryHeadroomPct)
	}
}

func mib(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
