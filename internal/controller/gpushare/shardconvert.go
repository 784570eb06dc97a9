package gpushare

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// maxReasonField bounds the model key in the reason, as synergy's own.
const maxReasonField = 64

// Whole GPUs into shards (issue 22, AntMan's "guaranteed jobs leave room").
// An opportunistic job can share a GPU only with a guaranteed job on
// gres/shard of it: Slurm 22.05 gives a GPU out whole or as shards, never
// both. So job_submit/synergy rewrites a guaranteed job asking for one GPU
// on one node into S_host shards of one GPU when its user's past jobs of
// its model, as the node agents measured them, all left most of the GPU
// unused; the rest of the GPU's shards are room for a guest.
//
// Why per user and model: a model key is the user's own text (a comment
// or a job name), so a history keyed by model alone would let anyone's
// idle jobs put everyone else's jobs of that name on shards. Keyed by uid
// too, a user's jobs only ever change how their own jobs are allocated.
//
// The history: for each (uid, model), the last historyJobs finished jobs
// that held one GPU (or shards of one) and were measured at least
// historyMinSamples times, each kept as its peak utilisation sample and
// its most GPU memory. Peak, not mean: a job that is idle most of the
// time but saturates the GPU in bursts would be hurt by a neighbour in
// every burst. The decision takes the maximum over the kept jobs, so one
// busy run of the model stops the rewrite until it leaves the history.
//
// Bounds (a user chooses model keys freely): at most
// historyKeysPerUser models per uid and historyKeys in all, the one
// updated longest ago going first (within the uid when the uid is at its
// bound, so one user's many keys only ever evict their own). The ledger
// keeps the same histories (model_job_use, ledger.MaxModelJobUseRows), and
// New replays them.
//
// Nothing here runs under slurmctld's locks but SizeJob's lookup, which
// takes only hist.mu (never usage.mu, which a pass may hold for tens of
// milliseconds); the ledger is written by the writer goroutine.

const (
	historyJobs        = ledger.MaxModelJobUsePerKey // = config.MaxConvertMinJobs
	historyMinSamples  = 3
	historyKeysPerUser = 64
	historyKeys        = ledger.MaxModelJobUseRows / historyJobs
)

// The history length is also the most convert_min_jobs may ask for.
var _ = [1]int{}[historyJobs-config.MaxConvertMinJobs]

// histKey is one user's model (lower case, as the pass reads it).
type histKey struct {
	uid   uint32
	model string
}

// modelHistory is one user's last jobs of one model, oldest first.
type modelHistory struct {
	jobs    []ledger.ModelJobUse
	updated uint64 // modelUse.tick when a job was last added
}

// modelUse holds every history; under its own mutex.
type modelUse struct {
	mu      sync.Mutex
	tick    uint64
	m       map[histKey]*modelHistory
	perUser map[uint32]int
	dirty   []ledger.ModelJobUse // for the writer goroutine
}

// add appends one finished job's use to its history, within the bounds.
// Caller holds mu.
func (h *modelUse) add(r ledger.ModelJobUse) {
	if h.m == nil {
		h.m, h.perUser = map[histKey]*modelHistory{}, map[uint32]int{}
	}
	k := histKey{r.User, r.Model}
	mh := h.m[k]
	if mh == nil {
		if h.perUser[r.User] >= historyKeysPerUser {
			h.evictOldest(func(o histKey) bool { return o.uid == r.User })
		}
		if len(h.m) >= historyKeys {
			h.evictOldest(func(histKey) bool { return true })
		}
		mh = &modelHistory{}
		h.m[k] = mh
		h.perUser[r.User]++
	}
	for _, j := range mh.jobs {
		if j.JobID == r.JobID {
			return // a job is one entry, whatever replays it
		}
	}
	if len(mh.jobs) == historyJobs {
		mh.jobs = append(mh.jobs[:0], mh.jobs[1:]...)
	}
	mh.jobs = append(mh.jobs, r)
	h.tick++
	mh.updated = h.tick
}

// evictOldest drops the history updated longest ago among those of.
// Caller holds mu. A scan: it runs only when a new key meets a bound.
func (h *modelUse) evictOldest(of func(histKey) bool) {
	var oldest histKey
	found, at := false, uint64(math.MaxUint64)
	for k, mh := range h.m {
		if of(k) && mh.updated < at {
			oldest, at, found = k, mh.updated, true
		}
	}
	if found {
		delete(h.m, oldest)
		if h.perUser[oldest.uid]--; h.perUser[oldest.uid] <= 0 {
			delete(h.perUser, oldest.uid)
		}
	}
}

// historySummary is what the decision reads of one history.
type historySummary struct {
	Jobs      int     // measured jobs kept
	UtilPeak  float64 // the highest of their peak utilisations, percent
	MemPeakMB float64 // the most GPU memory any of them held
}

// summary of uid's history of model (lower-cased here).
func (h *modelUse) summary(uid uint32, model string) historySummary {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s historySummary
	mh := h.m[histKey{uid, strings.ToLower(model)}]
	if mh == nil {
		return s
	}
	for _, j := range mh.jobs {
		s.Jobs++
		s.UtilPeak = max(s.UtilPeak, j.UtilPeak)
		s.MemPeakMB = max(s.MemPeakMB, j.MemPeakMB)
	}
	return s
}

// ConvertToShards is SizeJob's second step: d, the sizing of req, or
// the shard rewrite when decideShards says so. Memory only (hist.mu).
func (c *Sharing) ConvertToShards(sharing config.Sharing, req synergy.Request, nodes []synergy.Node, d synergy.Decision) synergy.Decision {
	conv := sharing.Convert
	if d.Action == synergy.Reject || !conv.Enabled() {
		return d
	}
	model := req.ModelKey()
	p := decideShards(conv, sharing.Opportunistic(req.Partition), req, nodes, c.hist.summary(req.UserID, model))
	switch p.Outcome {
	case shardsConverted:
	case shardsFewJobs, shardsBusy, shardsMemory, shardsNoRoom, shardsOptedOut:
		c.log.Debug("one-GPU job kept whole", keyUID, req.UserID, keyModel, model, "why", p.Outcome,
			"jobs", p.Hist.Jobs, "util_peak_pct", round1(p.Hist.UtilPeak), "mem_peak_mb", round1(p.Hist.MemPeakMB))
		return d
	default:
		return d
	}
	out := toShards(req, d, p, conv)
	c.log.Info("one-GPU job rewritten into shards of one GPU, room for a guest", keyUID, req.UserID, keyModel, model,
		"shards", p.Shards, "shards_per_gpu", p.ShardsPerGPU, "jobs", p.Hist.Jobs, "util_peak_pct", round1(p.Hist.UtilPeak),
		"mem_peak_mb", round1(p.Hist.MemPeakMB), keyCPUs, out.CPUsPerGPU, "mem_mb", out.MemMBPerGPU)
	return out
}

// noteFinishedUse is called by the pass (usage.go) for a job whose
// summary it closes: a job that held one GPU and was measured enough
// joins its user's history of its model. Caller holds usage.mu.
func (c *Sharing) noteFinishedUse(j *jobUsage) {
	if j.model == "" || !j.oneGPU || j.sum.Samples < historyMinSamples {
		return
	}
	r := ledger.ModelJobUse{User: j.sum.User, Model: j.model, JobID: j.sum.JobID, UtilPeak: j.sum.UtilPeak,
		MemPeakMB: j.sum.MemPeakMB, Samples: j.sum.Samples, Finished: j.sum.Finished}
	h := &c.hist
	h.mu.Lock()
	h.add(r)
	if len(h.dirty) < ledger.MaxModelJobUseRows { // a writer that keeps failing must not grow it without end
		h.dirty = append(h.dirty, r)
	}
	h.mu.Unlock()
	c.log.Debug("a finished job's GPU use joins its user's history of its model", keyJob, r.JobID, keyUID, r.User,
		keyModel, r.Model, "util_peak_pct", round1(r.UtilPeak), "mem_peak_mb", round1(r.MemPeakMB), "samples", r.Samples)
}

// flushModelUse saves the history entries added since the last flush; a
// failed save keeps them for the next. Writer goroutine only.
func (c *Sharing) flushModelUse(store ledger.ModelJobUseStore) {
	h := &c.hist
	h.mu.Lock()
	rows := h.dirty
	h.dirty = nil
	h.mu.Unlock()
	if len(rows) == 0 {
		return
	}
	if err := store.SaveModelJobUse(rows); err != nil {
		c.log.Error("saving users' model GPU-use histories failed; retrying with the next flush", keyErr, err, keyJobs, len(rows))
		h.mu.Lock()
		if len(h.dirty)+len(rows) <= ledger.MaxModelJobUseRows {
			h.dirty = append(rows, h.dirty...)
		}
		h.mu.Unlock()
	}
}

// restoreModelUse replays the saved histories, oldest first, within the
// same bounds as at run time.
func (c *Sharing) restoreModelUse(store ledger.ModelJobUseStore) error {
	rows, err := store.ModelJobUses()
	if err != nil {
		return err
	}
	h := &c.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range rows {
		h.add(r)
	}
	return nil
}

// Why a job is or is not rewritten into shards: the outcome of
// decideShards, named for tests and logs.
const (
	shardsConverted     = "converted"
	shardsOff           = "off"           // sharing.convert_below_pct is 0
	shardsOpportunistic = "opportunistic" // a guest already: left alone
	shardsNotOneGPU     = "not_one_gpu"   // anything but one untyped GPU on one node, one task
	shardsOptedOut      = "opted_out"     // --comment=whole_gpu or --exclusive
	shardsNoShards      = "no_shards"     // a GPU node of the partition has no shards, or they differ
	shardsFewJobs       = config.ConvertFewJobs
	shardsBusy          = config.ConvertBusy
	shardsMemory        = config.ConvertMemory
	shardsNoRoom        = "no_room" // the host's shards would be all of the GPU's
)

// shardPlan is decideShards' answer.
type shardPlan struct {
	Outcome      string
	Shards       int // the host's, with shardsConverted
	ShardsPerGPU int
	Hist         historySummary
}

// decideShards is the rule: is a job of req, whose user's history of its
// model is hist, rewritten into shards of one GPU of the partition's
// nodes, and into how many. Pure.
func decideShards(conv config.ShardConvert, opportunistic bool, req synergy.Request, nodes []synergy.Node, hist historySummary) shardPlan {
	p := shardPlan{Hist: hist}
	switch {
	case !conv.Enabled():
		p.Outcome = shardsOff
	case opportunistic:
		p.Outcome = shardsOpportunistic
	case !oneWholeGPU(req):
		p.Outcome = shardsNotOneGPU
	case req.Exclusive || req.WantsWholeGPU():
		p.Outcome = shardsOptedOut
	}
	if p.Outcome != "" {
		return p
	}
	if p.ShardsPerGPU = shardsPerGPU(nodes); p.ShardsPerGPU == 0 {
		p.Outcome = shardsNoShards
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
		p.Outcome = shardsNoRoom
		return p
	}
	p.Outcome, p.Shards = shardsConverted, host
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

// toShards turns the sizing d of req into the shard rewrite of plan: the
// job's CPUs and memory become per task and per node (one of each). A
// profile's best case is the model's need and stays; a GPU-proportional
// share shrinks with the job's share of the GPU, so the guest's shards
// come with the rest; the user's own --cpus-per-gpu / --mem-per-gpu carry
// over; their --cpus-per-task / --mem stay as they are (0 here).
func toShards(req synergy.Request, d synergy.Decision, p shardPlan, conv config.ShardConvert) synergy.Decision {
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
