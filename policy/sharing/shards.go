package sharing

import (
	"fmt"
	"math"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// Whole GPUs into shards (issue 22, AntMan's "guaranteed jobs leave room"):
// the rule. An opportunistic job can share a GPU only with a guaranteed
// job on gres/shard of it: Slurm 22.05 gives a GPU out whole or as shards,
// never both. So job_submit/synergy rewrites a guaranteed job asking for
// one GPU on one node into shards of one GPU when its user's past jobs of
// its model, as the node agents measured them, all left most of the GPU
// unused; the rest of the GPU's shards are room for a guest. The history
// itself (per user and model, bounded) is slurmctld's
// (internal/controller/gpushare/shardconvert.go); `lachesis-profiler
// history` reads the same rule (JudgeHistory).

// ShardConvert configures the rewrite of whole-GPU jobs into shards.
// Off while BelowPct is 0 (the default): a Slurm admin expects --gpus=1
// to give a whole GPU unless the site decided otherwise.
type ShardConvert struct {
	// BelowPct: every remembered job of the user's model peaked below
	// this GPU utilisation (percent; 0 = never convert).
	BelowPct float64
	// MemBelowMB: ... and below this much GPU memory on its GPU (shards
	// fence no memory: the guest needs the rest).
	MemBelowMB uint64
	// MinJobs: at least this many such jobs were measured.
	MinJobs int
	// HeadroomPct: the host's shards cover its peak utilisation plus this
	// (percentage points), never less than half the GPU.
	HeadroomPct float64
}

// DefaultShardConvert is the rewrite's default: off. Once a site sets
// convert_below_pct, at least 3 measured jobs, each under 16 GiB of GPU
// memory, and 10 points of headroom over their peak.
func DefaultShardConvert() ShardConvert {
	return ShardConvert{MemBelowMB: 16384, MinJobs: 3, HeadroomPct: 10}
}

// Enabled reports whether jobs are ever converted.
func (conv ShardConvert) Enabled() bool { return conv.BelowPct > 0 }

// Why a user's history of a model keeps their next one-GPU job whole
// (ShardConvert.JudgeHistory), as slurmctld's log and `lachesis-profiler
// history` name it.
const (
	ConvertFewJobs = "few_jobs" // fewer than convert_min_jobs measured
	ConvertBusy    = "busy"     // a remembered job peaked at or above convert_below_pct
	ConvertMemory  = "memory"   // ... or at or above convert_mem_below_mb
)

// JudgeHistory is what a user's history of a model (jobs measured, the
// highest of their peak utilisations in percent, the most GPU memory any
// held) says of the rewrite: "" when it allows it, else why not. The rule
// is on (Enabled) or the answer means nothing; the request and the nodes
// decide the rest (gpushare/shardconvert.go).
func (conv ShardConvert) JudgeHistory(jobs int, utilPeak, memPeakMB float64) string {
	switch {
	case jobs < conv.MinJobs:
		return ConvertFewJobs
	case !(utilPeak < conv.BelowPct):
		return ConvertBusy
	case !(memPeakMB < float64(conv.MemBelowMB)):
		return ConvertMemory
	}
	return ""
}

// Bounds of the sharing.convert_* keys. MaxConvertMinJobs is the history
// the core keeps per user and model (gpushare/shardconvert.go).
const (
	MaxConvertMinJobs     = 8
	MaxConvertHeadroomPct = 50
)

// maxReasonField bounds the model key in the reason, as synergy's own.
const maxReasonField = 64

// ShardHistory is what the rule reads of one user's history of one model.
type ShardHistory struct {
	Jobs      int     // measured jobs kept
	UtilPeak  float64 // the highest of their peak utilisations, percent
	MemPeakMB float64 // the most GPU memory any of them held
}

// Why a job is or is not rewritten into shards: the outcome of
// ShardConvert.Plan, named for tests and logs.
const (
	ShardsConverted     = "converted"
	ShardsOff           = "off"           // sharing.convert_below_pct is 0
	ShardsOpportunistic = "opportunistic" // a guest already: left alone
	ShardsNotOneGPU     = "not_one_gpu"   // anything but one untyped GPU on one node, one task
	ShardsOptedOut      = "opted_out"     // --comment=whole_gpu or --exclusive
	ShardsNoShards      = "no_shards"     // a GPU node of the partition has no shards, or they differ
	ShardsFewJobs       = ConvertFewJobs
	ShardsBusy          = ConvertBusy
	ShardsMemory        = ConvertMemory
	ShardsNoRoom        = "no_room" // the host's shards would be all of the GPU's
)

// ShardPlan is ShardConvert.Plan's answer.
type ShardPlan struct {
	Outcome      string
	Shards       int // the host's, with ShardsConverted
	ShardsPerGPU int
	Hist         ShardHistory
}

// Plan is the rule: is a job of req, whose user's history of its model is
// hist, rewritten into shards of one GPU of the partition's nodes, and
// into how many.
func (conv ShardConvert) Plan(opportunistic bool, req synergy.Request, nodes []synergy.Node, hist ShardHistory) ShardPlan {
	p := ShardPlan{Hist: hist}
	switch {
	case !conv.Enabled():
		p.Outcome = ShardsOff
	case opportunistic:
		p.Outcome = ShardsOpportunistic
	case !oneWholeGPU(req):
		p.Outcome = ShardsNotOneGPU
	case req.Exclusive || req.WantsWholeGPU():
		p.Outcome = ShardsOptedOut
	}
	if p.Outcome != "" {
		return p
	}
	if p.ShardsPerGPU = shardsPerGPU(nodes); p.ShardsPerGPU == 0 {
		p.Outcome = ShardsNoShards
		return p
	}
	if p.Outcome = conv.JudgeHistory(hist.Jobs, hist.UtilPeak, hist.MemPeakMB); p.Outcome != "" {
		return p
	}
	s := p.ShardsPerGPU
	// Its measured peak plus headroom, in whole shards, never below half
	// the GPU (rounded up).
	host := int(math.Ceil((hist.UtilPeak + conv.HeadroomPct) / 100 * float64(s)))
	host = max(host, (s+1)/2)
	if host >= s {
		p.Outcome = ShardsNoRoom
		return p
	}
	p.Outcome, p.Shards = ShardsConverted, host
	return p
}

// oneWholeGPU: the job asks for exactly one untyped GPU, by --gpus=1 or
// per node (--gres=gpu:1, --gpus-per-node=1), on at most one node, with at
// most one task, and for nothing else in its TRES strings. Anything else
// is left as submitted.
func oneWholeGPU(req synergy.Request) bool {
	g := req.GPU
	if g.PerSocket != "" || g.PerTask != "" || g.Nodes > 1 || g.Tasks > 1 || g.Typed() {
		return false
	}
	one := func(s string) bool {
		if strings.Contains(s, ",") {
			return false
		}
		n, err := gres.GPUs(s)
		return err == nil && n == 1
	}
	switch {
	case g.PerJob != "" && g.PerNode == "":
		return one(g.PerJob)
	case g.PerNode != "" && g.PerJob == "":
		return one(g.PerNode)
	}
	return false
}

// shardsPerGPU is the shards each GPU of the partition's GPU nodes has,
// when every one of them has shards, the same number per GPU, at least 2
// (0 otherwise: a job's shard count would mean different shares of a GPU
// on different nodes).
func shardsPerGPU(nodes []synergy.Node) int {
	per := 0
	for _, n := range nodes {
		g, err := gres.NodeGPUs(n.Gres)
		if err != nil || g == 0 {
			continue
		}
		sh, err := gres.Shards(n.Gres)
		if err != nil || sh == 0 || sh%g != 0 {
			return 0
		}
		if p := int(sh / g); per == 0 {
			per = p
		} else if p != per {
			return 0
		}
	}
	if per < 2 {
		return 0
	}
	return per
}

// Rewrite turns the sizing d of req into the shard rewrite of plan: the
// job's CPUs and memory become per task and per node (one of each). A
// profile's best case is the model's need and stays; a GPU-proportional
// share shrinks with the job's share of the GPU, so the guest's shards
// come with the rest; the user's own --cpus-per-gpu / --mem-per-gpu carry
// over; their --cpus-per-task / --mem stay as they are (0 here).
func (conv ShardConvert) Rewrite(req synergy.Request, d synergy.Decision, p ShardPlan) synergy.Decision {
	out := synergy.Decision{Action: synergy.ToShards, ModelKey: req.ModelKey(), Profiled: d.Profiled, NoProfile: d.NoProfile, Shards: p.Shards}
	scale := func(v float64) float64 {
		if d.Profiled {
			return v
		}
		return math.Ceil(v * float64(p.Shards) / float64(p.ShardsPerGPU))
	}
	cpus, mem := "CPUs as requested", "memory as requested"
	if d.Action == synergy.Set && d.CPUsPerGPU != 0 {
		out.CPUsPerGPU = int(scale(float64(d.CPUsPerGPU)))
	} else if n, ok, err := gres.CPUsPerGPU(req.CPUsPerTRES); err == nil && ok {
		out.CPUsPerGPU = int(n)
	}
	if d.Action == synergy.Set && d.MemMBPerGPU != 0 {
		out.MemMBPerGPU = uint64(scale(float64(d.MemMBPerGPU)))
	} else if n, ok, err := gres.MemMBPerGPU(req.MemPerTRES); err == nil && ok {
		out.MemMBPerGPU = n
	}
	if out.CPUsPerGPU != 0 {
		cpus = fmt.Sprintf("%d CPUs", out.CPUsPerGPU)
	}
	if out.MemMBPerGPU != 0 {
		mem = fmt.Sprintf("%d MB", out.MemMBPerGPU)
	}
	out.Reason = reasontext.Clip(fmt.Sprintf(
		"lachesis: model=%s: shard:%d of a GPU's %d instead of a whole GPU, room for a guest: its user's last %d jobs of it peaked at %.0f%% GPU, %.0f MB GPU memory (below %g%%, %d MB); %s, %s; --comment=%s keeps a whole GPU",
		reasontext.Field(out.ModelKey, maxReasonField), p.Shards, p.ShardsPerGPU, p.Hist.Jobs, p.Hist.UtilPeak, p.Hist.MemPeakMB,
		conv.BelowPct, conv.MemBelowMB, cpus, mem, synergy.WholeGPUToken), synergy.MaxReasonText)
	return out
}
