package gpushare

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// Whole GPUs into shards at submit (issue 22, AntMan's "guaranteed jobs
// leave room"): the rule is policy/sharing's (ShardConvert: Plan,
// Rewrite); here is what it reads, each user's history of each model's
// GPU use, kept from the node agents' measurements.
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
// takes only hist.mu (never mu, which a pass may hold for tens of
// milliseconds); the ledger is written by the writer goroutine.

const (
	historyJobs        = ledger.MaxModelJobUsePerKey // = sharing.MaxConvertMinJobs
	historyMinSamples  = 3
	historyKeysPerUser = 64
	historyKeys        = ledger.MaxModelJobUseRows / historyJobs
)

// The history length is also the most convert_min_jobs may ask for.
var _ = [1]int{}[historyJobs-sharing.MaxConvertMinJobs]

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

// summary of uid's history of model (lower-cased here).
func (h *modelUse) summary(uid uint32, model string) sharing.ShardHistory {
	h.mu.Lock()
	defer h.mu.Unlock()
	var s sharing.ShardHistory
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
// the shard rewrite when the rule (sharing.ShardConvert.Plan) says so on
// the user's history of the model. Memory only (hist.mu).
func (c *Sharing) ConvertToShards(cfg config.Sharing, req synergy.Request, nodes []synergy.Node, d synergy.Decision) synergy.Decision {
	conv := cfg.Rules.Convert
	if d.Action == synergy.Reject || !conv.Enabled() {
		return d
	}
	model := req.ModelKey()
	p := conv.Plan(cfg.Opportunistic(req.Partition), req, nodes, c.hist.summary(req.UserID, model))
	switch p.Outcome {
	case sharing.ShardsConverted:
	case sharing.ShardsFewJobs, sharing.ShardsBusy, sharing.ShardsMemory, sharing.ShardsNoRoom, sharing.ShardsOptedOut:
		c.log.Debug("one-GPU job kept whole", keyUID, req.UserID, keyModel, model, "why", p.Outcome,
			"jobs", p.Hist.Jobs, "util_peak_pct", round1(p.Hist.UtilPeak), "mem_peak_mb", round1(p.Hist.MemPeakMB))
		return d
	default:
		return d
	}
	out := conv.Rewrite(req, d, p)
	c.log.Info("one-GPU job rewritten into shards of one GPU, room for a guest", keyUID, req.UserID, keyModel, model,
		"shards", p.Shards, "shards_per_gpu", p.ShardsPerGPU, "jobs", p.Hist.Jobs, "util_peak_pct", round1(p.Hist.UtilPeak),
		"mem_peak_mb", round1(p.Hist.MemPeakMB), keyCPUs, out.CPUsPerGPU, "mem_mb", out.MemMBPerGPU)
	return out
}

// RefuseGuaranteedShare is SizeJob's first step (issue 34 item 5): while
// whole GPUs are rewritten into shards (convert_below_pct > 0), a job
// outside the opportunistic partition that asks for a share of a GPU
// itself (gres/shard or gres/mps) is refused at submit. Why: the rest of a
// rewritten job's GPU is room for a guest, judged by introspection and the
// memory bound; a second guaranteed job taking those shards would never be
// judged (a GPU with two guaranteed jobs is not: whose loss is whose
// cannot be told), so the user who never asked for shards would be slowed
// and charged more by it. Shares of a GPU are for the opportunistic
// partition; a whole GPU (--gpus) is what a guaranteed job asks for.
func RefuseGuaranteedShare(cfg config.Sharing, req synergy.Request) (synergy.Decision, bool) {
	if !cfg.Rules.Convert.Enabled() || cfg.Opportunistic(req.Partition) {
		return synergy.Decision{}, false
	}
	g := req.GPU
	if !gres.AsksForGPUShare(g.PerJob) && !gres.AsksForGPUShare(g.PerNode) &&
		!gres.AsksForGPUShare(g.PerSocket) && !gres.AsksForGPUShare(g.PerTask) {
		return synergy.Decision{}, false
	}
	return synergy.Decision{Action: synergy.Reject, Error: fmt.Sprintf(
		"Lachesis: a share of a GPU (gres/shard, gres/mps) is only for the opportunistic partition %q here: "+
			"the spare shards of a GPU beside a guaranteed job are its guests' room. Ask for a whole GPU (--gpus=1), "+
			"or submit with -p %s", cfg.OpportunisticPartition, cfg.OpportunisticPartition)}, true
}

// noteFinishedUse is called by the pass (usage.go) for a job whose
// summary it closes: a job that held one GPU and was measured enough
// joins its user's history of its model. Caller holds mu.
func (c *Sharing) noteFinishedUse(j *jobGPUUse) {
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
