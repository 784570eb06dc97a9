package gpushare

import (
	"log/slog"
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// Sharing is GPU sharing and per-job GPU use inside slurmctld: what the
// node agents report each job does with its GPUs, and what the core's
// pass does with it. Its methods are safe for concurrent use.
//
// Its two locks nest in one order, below the core's (core.Core says which):
// mu (Judge, a node's report, the requeuer's bookkeeping, the
// writer's copies), then hist.mu (a finished job joining its user's
// history, under mu; SizeJob's lookup and the writer take it alone).
// The requeuer runs Slurm's commands holding neither.
type Sharing struct {
	// exactRates: the reports' iterations/s are exact, not smoothed
	// (AssumeExactRates).
	exactRates bool
	log        *slog.Logger
	met        *metrics // nil unless metrics.listen is set
	// cfg is the config of the last pass (or of New); under the pass.
	cfg config.Config
	// mu guards use, intro, memGuard and oppReasons: its own, so a flood
	// of reports never waits for a pass nor a pass for the ledger.
	mu sync.Mutex
	// use: per-job GPU use and which jobs run (gpuuse.go).
	use gpuUseState
	// intro: the pair table, the guests whose requeue was asked, the
	// exclusions and the requeuer's queue (introspect.go, exclude.go).
	intro introState
	// memGuard: the memory bound's log state (memguard.go).
	memGuard memGuardState
	// hist: each user's history of each model's GPU use, for the shard
	// rewrite at submit (shardconvert.go); under its own mutex.
	hist modelUse
	// oppReasons: the reason shown for each waiting opportunistic job
	// (reasons.go); under mu.
	oppReasons map[uint32]oppReason
	reasonPass uint64 // counts showReasons' calls
}

// Log keys, constant so slurmctld's log can be grepped.
const (
	keyJob   = "job_id"
	keyJobs  = "jobs"
	keyErr   = "err"
	keyPath  = "path"
	keyModel = "model"
	keyCPUs  = "cpus_per_gpu"
)

// New makes the sharing state for cfg, logging to log; metrics are kept
// when cfg.Metrics.Listen is set (Collectors).
func New(cfg config.Config, log *slog.Logger) *Sharing {
	s := &Sharing{log: log, cfg: cfg}
	if cfg.Metrics.Listen != "" {
		s.met = newMetrics()
	}
	s.use.init()
	s.intro.limits = pairLimits(cfg)
	s.intro.init()
	s.intro.queue = make(chan requeueRequest, requeueQueue)
	return s
}

// Store is what sharing keeps in the ledger (internal/controller/ledger),
// each capability named by the part that uses it; ledger.SQLite has them
// all, checked here, so a store without one does not compile.
type Store interface {
	ledger.JobGPUUseStore   // each job's GPU-use summary (usage.go)
	ledger.JobGPUUseLoader  // the summaries of running jobs, at start (usage.go)
	ledger.BadPairStore     // pairs introspection marked bad (introspect.go)
	ledger.ExclusionStore   // the nodes Lachesis keeps jobs off (exclsave.go)
	ledger.ModelJobUseStore // users' histories of their models (shardconvert.go)
}

var _ Store = (*ledger.SQLite)(nil)

// Restore takes back what store kept (the summaries of running jobs, bad
// pairs, exclusions, users' model histories) and seeds the pair table; at
// start, before the first pass. now is Slurm's clock.
func (c *Sharing) Restore(store Store, now int64) error {
	if err := c.restoreGPUUse(store); err != nil {
		return err
	}
	c.seedPairTable()
	if err := c.restoreBadPairs(store, now); err != nil {
		return err
	}
	c.restoreExclusions(store, now)
	return c.restoreModelUse(store)
}

// Flush saves what changed since the last flush to store: the per-job
// summaries, bad pairs, model histories and exclusions. Writer goroutine
// only.
func (c *Sharing) Flush(store Store) {
	c.flushGPUUse(store)
	c.flushBadPairs(store)
	c.flushModelUse(store)
	c.flushExclusions(store)
}

// Judge is the pass's sharing stage, under the core's lock: it fills each
// job's answers (Job.GPUUse, Job.Reason) and pairScores (each waiting
// guest's best predicted pair, which the next pass ranks by), and hands
// requeues and ExcNodeList updates to the requeuer. Memory only. Its
// steps, in order:
//
//  1. reasons (reasons.go): each waiting guest's reason, from the
//     exclusions the last pass left;
//  2. observe (usage.go): which jobs run, wait and own what, each running
//     job's GPU-use segment and the idle rule; the summaries of ended
//     jobs closed;
//  3. the memory bound (memguard.go): guests over the room their hosts
//     leave are requeued;
//  4. introspection (introspect.go): each pair on one GPU judged, a
//     harmful guest requeued, a kept pair's speeds measured;
//  5. exclusions (exclude.go): where each waiting guest may not go, and
//     its pair score.
func (c *Sharing) Judge(now int64, cfg config.Config, jobs []Job, pairScores map[uint32]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfg = cfg
	c.showReasons(jobs)
	c.observe(now, jobs)
	c.guardMemory(now)
	c.introspect(now)
	c.excludeBadPairs(now, pairScores)
}

// RunRequeuer carries out the requeues and ExcNodeList updates the passes
// queue, through slurm (slurmcmd.Runner in slurmctld), until stop closes:
// a goroutine of its own (requeuer says why).
func (c *Sharing) RunRequeuer(stop <-chan struct{}, slurm SlurmJobs) {
	c.requeuer(stop, c.intro.queue, slurm)
}

// AssumeExactRates says the reports to come carry exact iterations/s, as
// the simulator's model has them, not the node agent's moving average
// (wire.ProgressTau): introspection then counts a window's samples at
// once instead of IntroSettle after it opened. Only a replay of the
// simulator's history (core's sharing equivalence test) sends such
// reports; a node agent never does. Call it before the first report.
func (c *Sharing) AssumeExactRates() { c.exactRates = true }
