package synergy

import (
	"fmt"
	"math"

	"github.com/lachesis-sched/lachesis/internal/controller/gres"
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
}

// ProfileLookup returns a model's best-case demand per GPU, if profiled.
type ProfileLookup func(model string) (sensitivity.Demand, bool)

// Decide sizes one job. nodes are the nodes of its partition.
func Decide(cfg Config, req Request, nodes []Node, lookup ProfileLookup) Decision {
	gpus, err := req.GPU.Total()
	if err != nil {
		return reject(fmt.Errorf("%w: %v", ErrBadRequest, err))
	}
	if gpus == 0 || !cfg.Enabled {
		return Decision{Action: Leave}
	}
	userCPUs, hasCPUs, err := perGPU(req.CPUsPerTRES, "cpus")
	if err != nil {
		return reject(err)
	}
	userMem, hasMem, err := perGPU(req.MemPerTRES, "mem")
	if err != nil {
		return reject(err)
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

	shape, ok := partitionShape(nodes, perNodeGPUs(req.GPU, gpus))
	if !ok {
		d.Reason = fmt.Sprintf("lachesis: left as submitted: no node of partition %q has %d GPUs", req.Partition, perNodeGPUs(req.GPU, gpus))
		return d
	}
	want, source := shape.propCPUs, "proportional share"
	wantMem := shape.propMemMB
	if best, ok := lookup(d.ModelKey); ok && best.CPUsPerGPU > 0 {
		bestMem := uint64(math.Ceil(best.MemGBPerGPU * 1024))
		if shape.holds(best.CPUsPerGPU, bestMem) {
			want, wantMem, source, d.Profiled = best.CPUsPerGPU, bestMem, "profile best case", true
		} else {
			source = fmt.Sprintf("proportional share (best case %d CPUs, %.1f GB per GPU fits no node)", best.CPUsPerGPU, best.MemGBPerGPU)
		}
	} else {
		source, d.NoProfile = "proportional share (no profile yet)", true
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
		d.Reason = fmt.Sprintf("lachesis: model=%s: kept the user's CPUs/memory request (synergy.override is off)", d.ModelKey)
		return d
	}
	d.Action = Set
	d.Reason = fmt.Sprintf("lachesis: model=%s %s: %s per GPU", d.ModelKey, source, describe(d, userCPUs, userMem, explicitCPUs, explicitMem))
	if d.CPUsPerGPU != 0 && d.MemMBPerGPU != 0 {
		sz := Sizing{CPUs: d.CPUsPerGPU, MemMB: d.MemMBPerGPU, ShareCPUs: shape.propCPUs, ShareMemMB: shape.propMemMB}
		d.Reason += " " + sz.marker()
	}
	return d
}

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

// perNodeGPUs is how many GPUs the job needs on one node: its per-node
// request, else its whole count (Slurm packs a small job onto one node).
func perNodeGPUs(r gres.Request, total uint64) int {
	if n, err := gres.GPUs(r.PerNode); err == nil && n > 0 {
		return int(n)
	}
	nodes := max(uint64(r.Nodes), 1)
	return int((total + nodes - 1) / nodes)
}

// shape summarises the partition's nodes that can host g GPUs of the job.
type shape struct {
	g         int
	propCPUs  int    // GPU-proportional CPUs per GPU, min over the nodes
	propMemMB uint64 // GPU-proportional memory per GPU, min over the nodes
	nodes     []Node // nodes with at least g GPUs
}

func partitionShape(nodes []Node, g int) (shape, bool) {
	s := shape{g: g, propCPUs: math.MaxInt, propMemMB: math.MaxUint64}
	for _, n := range nodes {
		ng, err := gres.GPUs(n.Gres)
		if err != nil || ng == 0 || int(ng) < g || n.CPUs <= 0 {
			continue
		}
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
