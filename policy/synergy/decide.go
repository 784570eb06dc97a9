package synergy

import (
	"fmt"
	"math"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Node is one node of the job's partition, as slurmctld knows it.
type Node struct {
	CPUs  int
	MemMB uint64
	Gres  string // the node's configured gres, e.g. "gpu:4" or "gpu:a100:8"
}

// Action tells the plugin what to do with the job.
type Action int

const (
	// Leave the job as submitted.
	Leave Action = iota
	// Set CPUs and/or memory per GPU.
	Set
	// Reject the job with Decision.Error as the user's message.
	Reject
	// ToShards: give the job Decision.Shards gres/shard of one GPU
	// instead of its one GPU; CPUsPerGPU is then its CPUs per task and
	// MemMBPerGPU its memory per node (one task, one node), 0 = leave
	// alone (gpushare/shardconvert.go decides).
	ToShards
)

// Decision is the outcome for one job.
type Decision struct {
	Action      Action
	ModelKey    string
	CPUsPerGPU  int    // 0: leave the job's CPUs alone
	MemMBPerGPU uint64 // 0: leave the job's memory alone
	// ClearCPUsPerTask/ClearMem: the user's conflicting options must go
	// (only with override), since Slurm rejects e.g. --cpus-per-task
	// together with --cpus-per-gpu.
	ClearCPUsPerTask bool
	ClearMem         bool
	// Profiled: the sizing came from the model's profile. NoProfile: the
	// model has none (so `lachesis-profiler missing` should list it).
	Profiled  bool
	NoProfile bool
	Reason    string // why, for the job's admin comment
	Error     string // for Reject
	// Shards: with ToShards, the job's gres/shard count.
	Shards int
}

// ProfileLookup returns the best-case demand per GPU that sizes a job of
// user uid naming model: the user's own profile, else a published one.
type ProfileLookup func(model string, uid uint32) (sensitivity.Demand, bool)

// Decide sizes one job. nodes are the nodes of its partition.
func Decide(cfg Config, req Request, nodes []Node, lookup ProfileLookup) Decision {
	gpus, err := req.GPU.Total()
	if err != nil {
		return reject(fmt.Errorf("%w: %v", ErrBadRequest, err))
	}
	if gpus == 0 || !cfg.Enabled {
		return Decision{Action: Leave}
	}
	userCPUs, hasCPUs, err := gres.CPUsPerGPU(req.CPUsPerTRES)
	if err != nil {
		return reject(fmt.Errorf("%w: %v", ErrBadRequest, err))
	}
	userMem, hasMem, err := gres.MemMBPerGPU(req.MemPerTRES)
	if err != nil {
		return reject(fmt.Errorf("%w: %v", ErrBadRequest, err))
	}
	if hasMem && req.MemMB != 0 {
		return reject(fmt.Errorf("%w: --mem-per-gpu cannot be combined with --mem or --mem-per-cpu", ErrBadRequest))
	}
	if hasCPUs && req.CPUsPerTask != 0 {
		return reject(fmt.Errorf("%w: --cpus-per-gpu cannot be combined with --cpus-per-task", ErrBadRequest))
	}
	explicitCPUs := hasCPUs || req.CPUsPerTask != 0
	explicitMem := hasMem || req.MemMB != 0
	d := Decision{Action: Leave, ModelKey: req.ModelKey()}

	g, spread := int(req.GPU.GPUsPerNode(gpus)), false
	shape, ok := partitionShape(cfg, nodes, g)
	if !ok && req.GPU.Spreadable() {
		// --gpus=N with no node count: Slurm spreads the job over as many
		// nodes as it needs, so size it for the most GPUs one node has.
		if most := mostGPUs(nodes); most > 0 && most < g {
			g, spread = most, true
			shape, ok = partitionShape(cfg, nodes, g)
		}
	}
	if !ok {
		d.Reason = clipReason(fmt.Sprintf("lachesis: left as submitted: no node of partition %q has %d GPUs", clipField(req.Partition), g))
		return d
	}
	want, source := shape.propCPUs, "proportional share"
	// A best case refused as fitting no node (per GPU; 0 when none was).
	var refusedCPUs int
	var refusedMemMB uint64
	wantMem := shape.propMemMB
	if best, ok := lookup(d.ModelKey, req.UserID); !ok || best.CPUsPerGPU <= 0 {
		source, d.NoProfile = "proportional share (no profile yet)", true
	} else if err := best.Check(); err != nil {
		// Checked at ingest too; this guards profiles from elsewhere, so
		// a bad number can never reach a job or an overflowing product.
		source = "proportional share (profile ignored: implausible best case)"
	} else if bestMem := best.MemMB(); shape.holds(best.CPUsPerGPU, bestMem) {
		want, wantMem, source, d.Profiled = best.CPUsPerGPU, bestMem, "profile best case", true
	} else {
		source = fmt.Sprintf("proportional share (best case %d CPUs, %.1f GB per GPU fits no node)", best.CPUsPerGPU, best.MemGBPerGPU)
		refusedCPUs, refusedMemMB = best.CPUsPerGPU, bestMem
	}
	if spread {
		source += fmt.Sprintf(" (spread over nodes of %d GPUs)", g)
	}
	if reserveChanged(cfg, nodes, shape, want, wantMem, refusedCPUs, refusedMemMB) {
		source += fmt.Sprintf(" (after keeping %d CPUs, %d MB per node for jobs without GPUs)",
			cfg.CPUReservePerNode, cfg.MemReservePerNodeMB)
	}
	if !explicitCPUs || cfg.Override {
		d.CPUsPerGPU = want
		d.ClearCPUsPerTask = req.CPUsPerTask != 0
	}
	if !explicitMem || cfg.Override {
		d.MemMBPerGPU = wantMem
		d.ClearMem = req.MemMB != 0
	}
	if d.CPUsPerGPU == 0 && d.MemMBPerGPU == 0 {
		d.Profiled = false
		d.Reason = clipReason(fmt.Sprintf("lachesis: model=%s: kept the user's CPUs/memory request (synergy.override is off)", clipField(d.ModelKey)))
		return d
	}
	d.Action = Set
	d.Reason = clipReason(fmt.Sprintf("lachesis: model=%s %s: %s per GPU on partition %s", clipField(d.ModelKey), source, describe(d, userCPUs, userMem, explicitCPUs, explicitMem), clipField(req.Partition)))
	if d.CPUsPerGPU != 0 && d.MemMBPerGPU != 0 {
		// The marker goes after the clipped text, so it is always whole:
		// the fallback reads it back.
		sz := Sizing{CPUs: d.CPUsPerGPU, MemMB: d.MemMBPerGPU, ShareCPUs: shape.propCPUs, ShareMemMB: shape.propMemMB}
		d.Reason += " " + sz.marker()
	}
	return d
}

// Bounds on the admin comment Lachesis writes: the plugin's buffer is 512
// bytes, and the marker (at most ~90 bytes) must fit whole after the text.
const (
	MaxReasonText = 384
	maxField      = 64 // a user-chosen name (model key, partition) in the text
)

// clipField is a user-chosen name (model key, partition) as the admin
// comment shows it: it can never spell a marker (reasontext.Field).
func clipField(s string) string { return reasontext.Field(s, maxField) }

// clipReason cuts the human-readable part of a reason to MaxReasonText.
func clipReason(s string) string { return reasontext.Clip(s, MaxReasonText) }

func describe(d Decision, userCPUs, userMem uint64, explicitCPUs, explicitMem bool) string {
	cpus := fmt.Sprintf("%d CPUs", d.CPUsPerGPU)
	if d.CPUsPerGPU == 0 {
		cpus = "CPUs as requested"
		if userCPUs != 0 {
			cpus = fmt.Sprintf("%d CPUs as requested", userCPUs)
		}
	} else if explicitCPUs {
		cpus += " (override)"
	}
	mem := fmt.Sprintf("%d MB", d.MemMBPerGPU)
	if d.MemMBPerGPU == 0 {
		mem = "memory as requested"
		if userMem != 0 {
			mem = fmt.Sprintf("%d MB as requested", userMem)
		}
	} else if explicitMem {
		mem += " (override)"
	}
	return cpus + ", " + mem
}

func reject(err error) Decision {
	return Decision{Action: Reject, Error: err.Error()}
}

// mostGPUs is the largest GPU count of a node among nodes.
func mostGPUs(nodes []Node) int {
	most := 0
	for _, n := range nodes {
		if ng, err := gres.NodeGPUs(n.Gres); err == nil && n.CPUs > 0 {
			most = max(most, int(ng))
		}
	}
	return most
}

// shape summarises the partition's nodes that can host g GPUs of the job.
type shape struct {
	g         int
	propCPUs  int    // GPU-proportional CPUs per GPU, min over the nodes
	propMemMB uint64 // GPU-proportional memory per GPU, min over the nodes
	nodes     []Node // nodes with at least g GPUs
}

// partitionShape sizes against what each node has for GPU jobs: its CPUs
// and memory less cfg's reserve for jobs without GPUs (usable).
func partitionShape(cfg Config, nodes []Node, g int) (shape, bool) {
	s := shape{g: g, propCPUs: math.MaxInt, propMemMB: math.MaxUint64}
	for _, n := range nodes {
		ng, err := gres.NodeGPUs(n.Gres)
		if err != nil || ng == 0 || int(ng) < g || n.CPUs <= 0 {
			continue
		}
		n = cfg.usable(n, int(ng))
		s.nodes = append(s.nodes, n)
		s.propCPUs = min(s.propCPUs, max(n.CPUs/int(ng), 1))
		s.propMemMB = min(s.propMemMB, n.MemMB/ng)
	}
	return s, len(s.nodes) > 0
}

// holds reports whether some node can give the job g GPUs with cpus and
// memMB per GPU.
func (s shape) holds(cpus int, memMB uint64) bool {
	for _, n := range s.nodes {
		if n.CPUs >= s.g*cpus && n.MemMB >= uint64(s.g)*memMB {
			return true
		}
	}
	return false
}

// usable is the part of node n, which has ng GPUs, that GPU jobs are sized
// out of: its CPUs and memory less the reserve for jobs without GPUs
// (Config.CPUReservePerNode). A node too small for the whole reserve keeps
// what it can: each GPU keeps at least 1 CPU and GPU jobs keep at least
// half the memory, since a GPU that no job can be sized for helps no one.
func (c Config) usable(n Node, ng int) Node {
	n.CPUs -= min(c.CPUReservePerNode, max(n.CPUs-ng, 0))
	n.MemMB -= min(uint64(c.MemReservePerNodeMB), n.MemMB/2)
	return n
}

// reserveChanged reports whether the reserve made the sizing (cpus, memMB
// per GPU, chosen on s) differ from what the whole nodes would have given,
// so that the admin comment says why a job got less than the node's share.
// refusedCPUs and refusedMemMB are a best case refused as fitting no node
// (0 when none was): the reserve changed the sizing if whole nodes hold it.
func reserveChanged(cfg Config, nodes []Node, s shape, cpus int, memMB uint64, refusedCPUs int, refusedMemMB uint64) bool {
	if cfg.CPUReservePerNode == 0 && cfg.MemReservePerNodeMB == 0 {
		return false
	}
	if cpus != s.propCPUs || memMB != s.propMemMB {
		return false // a best case that fits inside what the reserve leaves
	}
	whole, ok := partitionShape(Config{}, nodes, s.g)
	if !ok {
		return false
	}
	return whole.propCPUs != cpus || whole.propMemMB != memMB ||
		(refusedCPUs > 0 && whole.holds(refusedCPUs, refusedMemMB))
}
