package synergy

import (
	"fmt"
	"strings"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Start-time sizing. Decide sizes a job once, at sbatch, against what the
// partition's nodes hold when empty; by the time the job can start the
// nodes are shared, and Slurm cannot resize a running job. Synergy-TUNE
// decides at placement instead, with the servers' free resources in view.
// FitNow is that decision for Slurm: slurmctld starts a pending job at its
// sizing wherever that is free, so the rule only has work when the sizing
// fits no node's free resources while some node has the job's GPUs free.
// Then the job is lowered to what lets it start now. The pass applies it to
// waiting jobs (core.Fallback, through Slurm's job update) and the
// simulator applies it at every placement (sim's AllocStart), so what the
// evaluation measures is what slurmctld runs.
//
// FitNow only ever lowers a job, never below min(its sizing, its share),
// so no job runs slower than at the proportional share, and numbers it
// takes from the marker can never raise a request. Restore (below) is the
// one path that raises, with numbers from the profile and the nodes only.

// Fit is how a job fits one node's free resources now.
type Fit uint8

const (
	// NoFit: the node lacks the job's GPUs, or even min(sizing, share)
	// per GPU of CPUs or memory.
	NoFit Fit = iota
	// FitsAsSized: the job's current request fits; Slurm starts it as is.
	FitsAsSized
	// FitsLowered: only a smaller request fits: as much of the sizing as
	// the node can spare while it keeps the share of each of its other free
	// GPUs (so no later job finds GPUs free without their share), and never
	// less than min(sizing, share).
	FitsLowered
)

// FitOnNode decides, per GPU, what a job sized sz (its current request and
// its share) with g GPUs on a node gets there now, given the node's
// capacity and use.
func FitOnNode(sz Sizing, g int, n NodeState) (cpus int, memMB uint64, fit Fit) {
	freeGPUs := n.GPUs - n.AllocGPUs
	if !n.Usable || g <= 0 || freeGPUs < g || sz.CPUs <= 0 || sz.MemMB == 0 {
		return 0, 0, NoFit
	}
	freeCPUs := max(n.CPUs-n.AllocCPUs, 0)
	freeMem := n.MemMB - min(n.AllocMemMB, n.MemMB)
	if freeCPUs >= g*sz.CPUs && freeMem >= uint64(g)*sz.MemMB {
		return sz.CPUs, sz.MemMB, FitsAsSized
	}
	others := freeGPUs - g // the node's other free GPUs keep their share
	cpus, okC := lowered(sz.CPUs, sz.ShareCPUs, g, freeCPUs, others*sz.ShareCPUs)
	mem, okM := loweredMem(sz.MemMB, sz.ShareMemMB, g, freeMem, uint64(others)*sz.ShareMemMB)
	if !okC || !okM {
		return 0, 0, NoFit
	}
	return cpus, mem, FitsLowered
}

// lowered is FitOnNode's rule for CPUs: per GPU, want if it fits the
// headroom (free less reserved), else what the headroom gives, but at least
// min(want, share); false when even that is not free.
func lowered(want, share, g, free, reserved int) (int, bool) {
	least := min(want, share)
	per := want
	if head := free - reserved; head < g*want {
		per = max(head/g, least)
	}
	per = min(per, want)
	return per, g*per <= free
}

// loweredMem is lowered for memory (unsigned).
func loweredMem(want, share uint64, g int, free, reserved uint64) (uint64, bool) {
	least := min(want, share)
	per := want
	var head uint64
	if free > reserved {
		head = free - reserved
	}
	if head < uint64(g)*want {
		per = max(head/uint64(g), least)
	}
	per = min(per, want)
	return per, uint64(g)*per <= free
}

// Resize is a start-time sizing decision for one pending job.
type Resize struct {
	CPUsPerGPU  int
	MemMBPerGPU uint64
	// Sizing is the job's new marker values: the lowered request and the
	// unchanged share, so a later pass can lower it again but never raise it.
	Sizing Sizing
}

// FitNow is the start-time rule for a pending job sized sz with g GPUs per
// node: if its request fits no node's free resources but some node has its
// GPUs free with at least min(sizing, share) per GPU, it is lowered to the
// most any such node gives (FitOnNode), preferring more CPUs, then more
// memory. ok is false when the job fits somewhere as sized (Slurm starts it)
// or nowhere at all (it waits as it is, for its sizing).
func FitNow(sz Sizing, g int, nodes []NodeState) (Resize, bool) {
	var best Resize
	found := false
	for _, n := range nodes {
		cpus, mem, fit := FitOnNode(sz, g, n)
		switch fit {
		case FitsAsSized:
			return Resize{}, false
		case FitsLowered:
			if !found || cpus > best.CPUsPerGPU || (cpus == best.CPUsPerGPU && mem > best.MemMBPerGPU) {
				best, found = Resize{CPUsPerGPU: cpus, MemMBPerGPU: mem}, true
			}
		}
	}
	if !found || (best.CPUsPerGPU >= sz.CPUs && best.MemMBPerGPU >= sz.MemMB) {
		return Resize{}, false
	}
	best.Sizing = Sizing{CPUs: best.CPUsPerGPU, MemMB: best.MemMBPerGPU, ShareCPUs: sz.ShareCPUs, ShareMemMB: sz.ShareMemMB}
	return best, true
}

// describeResize is the admin comment's account of a start-time resize.
func describeResize(from Sizing, to Resize) string {
	what := "between its share and its sizing"
	if to.CPUsPerGPU <= from.ShareCPUs && to.MemMBPerGPU <= from.ShareMemMB {
		what = "its proportional share"
	}
	return fmt.Sprintf("lachesis: resized to start now: %d CPUs, %d MB per GPU (%s; share %d CPUs, %d MB) because %d CPUs, %d MB per GPU fit no node whose GPUs were free",
		to.CPUsPerGPU, to.MemMBPerGPU, what, from.ShareCPUs, from.ShareMemMB, from.CPUs, from.MemMB)
}

// Restore is the raising half of start-time sizing, kept apart from
// Fallback (which only lowers, from numbers in the job's marker): a
// pending job Lachesis sized whose request is below its best case (a
// requeued job lowered for an earlier run, or one lowered for a node that
// another job then took) is raised toward its best case when a node with
// its GPUs free holds more now. Its numbers never come from the job's
// text: the best case is the model's profile (best) and the share is the
// nodes' own (the least per GPU of the usable nodes with g GPUs, less
// cfg's reserve for jobs without GPUs); cur, read from the marker, only
// says whether the result is a raise. The result is what FitNow gives a
// job sized to its best case, so it never exceeds the profile's best case
// nor what a node has free.
func Restore(cfg Config, comment string, best sensitivity.Demand, cur Sizing, g int, nodes []NodeState) (Shrink, bool) {
	if g <= 0 || best.CPUsPerGPU <= 0 || best.MemGBPerGPU <= 0 || best.Check() != nil {
		return Shrink{}, false
	}
	shareCPUs, shareMem, ok := nodeShare(cfg, nodes, g)
	if !ok {
		return Shrink{}, false
	}
	want := Sizing{CPUs: best.CPUsPerGPU, MemMB: best.MemMB(), ShareCPUs: shareCPUs, ShareMemMB: shareMem}
	to := Resize{CPUsPerGPU: want.CPUs, MemMBPerGPU: want.MemMB, Sizing: want}
	fitsAsSized := false
	for _, n := range nodes {
		if _, _, fit := FitOnNode(want, g, n); fit == FitsAsSized {
			fitsAsSized = true
			break
		}
	}
	if !fitsAsSized {
		if to, ok = FitNow(want, g, nodes); !ok {
			return Shrink{}, false
		}
	}
	if to.CPUsPerGPU < cur.CPUs || to.MemMBPerGPU < cur.MemMB ||
		(to.CPUsPerGPU == cur.CPUs && to.MemMBPerGPU == cur.MemMB) {
		return Shrink{}, false // not a raise in both: Fallback's business
	}
	at := strings.LastIndex(comment, cur.marker())
	if at < 0 {
		return Shrink{}, false
	}
	note := fmt.Sprintf("lachesis: raised to start now: %d CPUs, %d MB per GPU (profile best case %d CPUs, %d MB) from %d CPUs, %d MB per GPU",
		to.CPUsPerGPU, to.MemMBPerGPU, want.CPUs, want.MemMB, cur.CPUs, cur.MemMB)
	return Shrink{
		CPUsPerGPU:   to.CPUsPerGPU,
		MemMBPerGPU:  to.MemMBPerGPU,
		AdminComment: comment[:at] + to.Sizing.marker() + "; " + note,
		Raise:        true,
	}, true
}

// nodeShare is the GPU-proportional share per GPU that Decide would give
// a job of g GPUs per node on nodes: the least over the usable nodes with
// at least g GPUs of their CPUs and memory (less cfg's reserve) per GPU.
func nodeShare(cfg Config, nodes []NodeState, g int) (int, uint64, bool) {
	cpus, mem, found := 0, uint64(0), false
	for _, n := range nodes {
		if !n.Usable || n.GPUs < g || n.GPUs <= 0 || n.CPUs <= 0 {
			continue
		}
		u := cfg.usable(Node{CPUs: n.CPUs, MemMB: n.MemMB}, n.GPUs)
		c, m := max(u.CPUs/n.GPUs, 1), u.MemMB/uint64(n.GPUs)
		if !found || c < cpus {
			cpus = c
		}
		if !found || m < mem {
			mem = m
		}
		found = true
	}
	return cpus, mem, found
}
