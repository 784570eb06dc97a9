package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/util/safego"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Log keys, constant so slurmctld's log can be grepped.
const (
	keyJob      = "job_id"
	keyQueue    = "queue"
	keyService  = "service_gpu_s"
	keyErr      = "err"
	keyJobs     = "jobs"
	keyDuration = "took"
	keyPath     = "path"
	keySource   = "source"
	keySamples  = "samples"
	keyCharged  = "charged_gpus"
	keyJobCPUs  = "cpus"
	keyGPUType  = "gpu_type"
	keySpeed    = "speed"

	keyPreemptor      = "preemptor_job_id"
	keyPreemptorQueue = "preemptor_queue"
	keyRan            = "ran_s"
	keyRequeues       = "requeues"
	keyReason         = "reason"
	keyPreemptions    = "preemptions"
	keyOutcome        = "outcome"
	keyRule           = "rule"
	keyRefusals       = "refusals"
	keyWaited         = "waited_s"
)

// ErrNotFound is returned for jobs the core has never seen.
var ErrNotFound = errors.New("job not known to lachesis")

// Core is Lachesis's state inside slurmctld. Its methods are safe for
// concurrent use.
type Core struct {
	log        *slog.Logger
	configPath string
	env        Env
	store      ledger.Store

	mu         sync.Mutex // guards the fields below
	cfg        config.Config
	ranker     *priority.Ranker
	rankerDist *priority.Distribution
	records    map[uint32]*ledger.Record
	decisions  map[uint32]Decision
	seen       map[uint32]bool // scratch: jobs present in this pass
	jobs       []priority.Job
	jobIndex   []int // jobs[i] came from snapshot jobIndex[i]
	results    []priority.Result
	preemption preemptionState // who may preempt whom, and what came of it (preempt.go)
	// clock is Slurm's time for Preemptable (a victim's run length);
	// tests replaying a history set it.
	clock func() int64

	// dist is the Gittins distribution the next pass uses; the writer
	// goroutine replaces it as history accumulates.
	dist atomic.Pointer[priority.Distribution]
	// minHistory mirrors cfg.GittinsMinHistory for the writer goroutine.
	minHistory atomic.Int64

	// speedBase is the config's speed lookup without profiles
	// (config.Speeds); weighRun adds the profile cache's throughputs.
	speedBase priority.Speeds

	// Synergy sizing (synergy.go): where profiles come from.
	bestCase synergy.ProfileLookup
	// sizing: start-time sizing's state between passes (synergy.go);
	// under mu.
	sizing startSizing

	// oppReasons: the reason shown for each waiting opportunistic job
	// (blocked.go); under mu.
	oppReasons map[uint32]oppReason

	// ends: the true ends nodes reported (jobend.go).
	ends jobEnds
	// usage: per-job GPU use reported by node agents (usage.go); under
	// its own mutex.
	usage usageState
	// pairScores: each waiting opportunistic job's pair score from the
	// last pass (exclude.go), read by the next pass's ranking; under mu.
	pairScores map[uint32]float64
	// hist: each user's history of each model's GPU use, for the shard
	// rewrite at submit (shardconvert.go); under its own mutex.
	hist modelUse

	// finished: jobs a pass saw finish that slurmctld still lists, with
	// their records (nil when not known), which continue if the job is
	// requeued (finished.go); under mu.
	finished map[uint32]*ledger.Record
	// heirs: the service of recently ended jobs, which a job replacing one
	// inherits (inherit.go); nil when off; under mu.
	heirs *priority.Inheritance
	// throttles: job arrays whose pending tasks wait on their throttle
	// (inherit.go); under mu.
	throttles arrayThrottles
	// siblings: the sweep of each job and its completed members
	// (siblings.go); nil when sibling prediction is off; under mu.
	siblings *priority.Siblings

	// agents holds the profile cache, the model keys for `missing` and,
	// when agent.listen is set, the node-agent listener. Set once in Open,
	// before any plugin call; nil for a Core made by New (tests).
	agents *agentserver.Service

	met        *metrics  // nil unless metrics.listen is set (metrics.go)
	metricsSrv io.Closer // serves met (a *metricsrv.Server or Keeper); nil when off

	pendMu  sync.Mutex
	pending map[uint32]ledger.Record // queued for the writer
	spare   map[uint32]ledger.Record // the writer's last batch, emptied
	batch   []ledger.Record          // writer-only scratch
	w       writerState              // writer-only: retries (writer.go)
	marks   markerState              // under mu: SystemComment markers (restore.go)
	fs      fairShareState           // under mu: usage per account (fairshare.go)
	// pendUsage is the latest fair-share table for the writer; under
	// pendMu, saved when usageDirty.
	pendUsage  []ledger.AccountUsage
	usageDirty bool
	kick       chan struct{}
	stop       chan struct{}
	stopped    chan struct{}
}

// Env is what slurmctld tells the core when it starts.
type Env struct {
	ConfigPath  string // lachesis.yaml
	AuthInfo    string // slurm.conf AuthInfo (munge socket)
	ClusterName string
	SlurmUID    uint32 // SlurmUser, allowed to report besides root
	// Reconfigure: this slurmctld was started by `scontrol reconfigure` to
	// replace a running one (Slurm 24.05 and later reconfigure so; 22.05
	// re-reads the config in place, Reconfigure). Its config is a reload,
	// and the old slurmctld holds the listeners' ports until this one is up.
	Reconfigure bool
}

// Open loads the config at env.ConfigPath (defaults if absent), opens the
// ledger it names, restores every active job's record and starts the writer.
func Open(env Env, log *slog.Logger) (*Core, error) {
	cfg, err := config.Load(env.ConfigPath)
	if err != nil {
		return nil, err
	}
	store, err := ledger.OpenOwned(cfg.DBPath, int(env.SlurmUID))
	if err != nil {
		return nil, err
	}
	c, err := New(cfg, store, log)
	if err != nil {
		store.Close()
		return nil, err
	}
	c.configPath = env.ConfigPath
	c.env = env
	// Profiles and the agent listener (when agent.listen is set): goroutines
	// of their own, never under slurmctld's locks.
	c.agents, err = agentserver.OpenService(cfg, env.AuthInfo, env.SlurmUID, log)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.agents.SetJobEndHandler(c.ReportEnd)
	c.agents.SetJobUsageHandler(c.ReportUsage)
	// Introspection's requeues run here, outside slurmctld's locks
	// (introspect.go's requeuer says why).
	queue := c.usage.intro.queue
	safego.Loop(log, "sharing requeuer", func() { c.requeuer(queue, scontrolJobs{}) }, nil)
	if c.metricsSrv, err = c.met.serve(cfg.Metrics.Listen, c.agents, env.Reconfigure, log); err != nil {
		c.Close()
		return nil, err
	}
	if env.Reconfigure {
		c.log.Info("lachesis config reloaded", keyPath, c.configPath)
		c.logThresholds(slog.LevelInfo, "reload")
	} else {
		c.logThresholds(slog.LevelInfo, "start")
	}
	c.bestCase = func(model string, uid uint32) (sensitivity.Demand, bool) {
		r, ok := c.agents.Profile(model, uid)
		return r.Best, ok
	}
	return c, nil
}

// Profile returns the profile that sizes a job of user uid naming model.
// It reads memory only, so job_submit may call it under slurmctld's locks.
func (c *Core) Profile(model string, uid uint32) (profile.Record, bool) {
	if c.agents == nil {
		return profile.Record{}, false
	}
	return c.agents.Profile(model, uid)
}

// New builds a Core on an already opened store (tests use it directly).
func New(cfg config.Config, store ledger.Store, log *slog.Logger) (*Core, error) {
	active, err := store.Active()
	if err != nil {
		return nil, err
	}
	c := &Core{
		clock:      func() int64 { return time.Now().Unix() },
		log:        log,
		store:      store,
		cfg:        cfg,
		records:    make(map[uint32]*ledger.Record, len(active)),
		decisions:  make(map[uint32]Decision, len(active)),
		seen:       make(map[uint32]bool, len(active)),
		ends:       jobEnds{held: make(map[uint32]int64)},
		finished:   make(map[uint32]*ledger.Record),
		pending:    make(map[uint32]ledger.Record),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		stopped:    make(chan struct{}),
		met:        newMetricsIf(cfg.Metrics.Listen),
		pairScores: map[uint32]float64{},
		throttles:  arrayThrottles{},
	}
	c.minHistory.Store(int64(cfg.GittinsMinHistory))
	c.usage.intro.queue = make(chan requeueRequest, introRequeueQueue)
	c.speedBase = *cfg.Speeds(nil)
	c.siblings = priority.NewSiblings(cfg.Tiresias.SiblingWindow)
	c.heirs = newHeirs(cfg.Tiresias)
	for i := range active {
		r := active[i]
		c.records[r.JobID] = &r
	}
	usage, err := store.Usage()
	if err != nil {
		return nil, err
	}
	c.fs.restore(usage)
	if err := c.rememberFinished(store); err != nil {
		return nil, err
	}
	c.restoreSweeps(store)
	if err := c.restoreUsage(store); err != nil {
		return nil, err
	}
	c.usage.intro.init()
	c.seedPairTable()
	if err := c.restoreBadPairs(store); err != nil {
		return nil, err
	}
	c.restoreExclusions(store, c.clock())
	if err := c.restoreModelUse(store); err != nil {
		return nil, err
	}
	c.loadDistribution()
	if err := c.rebuildRanker(); err != nil {
		return nil, err
	}
	safego.Loop(log, "ledger writer", c.writer, func() { close(c.stopped) })
	log.Info("lachesis core ready", keyJobs, len(active), keyPath, cfg.DBPath)
	return c, nil
}

// rebuildRanker makes a ranker for the current config and distribution.
// Caller holds mu (or is the constructor).
func (c *Core) rebuildRanker() error {
	dist := c.dist.Load()
	r, err := priority.NewRanker(c.cfg.Tiresias, dist)
	if err != nil {
		return err
	}
	c.ranker, c.rankerDist = r, dist
	return nil
}

// logThresholds says, at level, which queue boundaries rank jobs now and
// where they come from: with threshold_quantiles set and a distribution,
// the quantiles rank and a fixed thresholds list only stands in until a
// distribution exists, so an admin who edits thresholds alone sees here
// that nothing changed. Caller holds mu (or is the constructor).
func (c *Core) logThresholds(level slog.Level, when string) {
	t := c.cfg.Tiresias
	args := []any{"when", when, "thresholds_gpu_s", formatList(c.ranker.Config().Thresholds, "%.0f")}
	if len(t.ThresholdQuantiles) > 0 && c.rankerDist != nil {
		dist := fmt.Sprintf("the cluster's %d most recent completed jobs", c.rankerDist.Len())
		if c.rankerDist == priority.SeedDistribution() {
			dist = "the bundled distribution (until gittins_min_history jobs have completed)"
		}
		args = append(args, keySource, "threshold_quantiles "+formatList(t.ThresholdQuantiles, "%g")+" of "+dist,
			"unused", "thresholds "+formatList(t.Thresholds, "%.0f")+" (only without a distribution; remove threshold_quantiles to rank by them)")
	} else {
		args = append(args, keySource, "thresholds (a fixed list)")
	}
	c.log.Log(context.Background(), level, "queue thresholds in force", args...)
}

// formatList writes vs as "[a,b,c]", each with format (no spaces, so the
// log shows it unquoted).
func formatList(vs []float64, format string) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf(format, v)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// PassInterval is how often the plugin should call Pass.
func (c *Core) PassInterval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.PassInterval
}

// Config returns the configuration in force.
func (c *Core) Config() config.Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Reconfigure re-reads the config file. A bad file keeps the config in
// force and returns the reason, which the caller logs.
func (c *Core) Reconfigure() error {
	cfg, err := config.Load(c.configPath)
	if err != nil {
		c.log.Error("reconfigure failed, keeping the previous config", keyErr, err)
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cfg.DBPath != c.cfg.DBPath {
		c.log.Warn("db_path changed; it takes effect when slurmctld restarts", keyPath, cfg.DBPath)
		cfg.DBPath = c.cfg.DBPath
	}
	if cfg.Sharing.PairTable != c.cfg.Sharing.PairTable || cfg.Sharing.PairTableGPU != c.cfg.Sharing.PairTableGPU {
		c.log.Warn("sharing.pair_table changed; the pair table is seeded when slurmctld starts", keyPath, cfg.Sharing.PairTable)
	}
	old := c.cfg
	c.cfg = cfg
	c.minHistory.Store(int64(cfg.GittinsMinHistory))
	if err := c.rebuildRanker(); err != nil {
		c.cfg = old
		c.minHistory.Store(int64(old.GittinsMinHistory))
		c.log.Error("reconfigure failed, keeping the previous config", keyErr, err)
		return err
	}
	c.speedBase = *cfg.Speeds(nil)
	c.resizeSweeps(old.Tiresias.SiblingWindow, cfg.Tiresias.SiblingWindow)
	c.resizeHeirs(old.Tiresias, cfg.Tiresias)
	c.log.Info("lachesis config reloaded", keyPath, c.configPath)
	c.logThresholds(slog.LevelInfo, "reload")
	return nil
}

// Pass ranks every job in one call: it updates each job's attained service
// from what slurmctld reports, decides queues and priorities, and writes one
// Decision per snapshot into out (Priority 0 = leave the job alone). It does
// no I/O: ledger changes go to the writer goroutine. It returns how many
// pending jobs are candidates for the Synergy fallback (see Fallback).
//
// A pass is three stages, each a method of its own: account (fold every
// snapshot into its job's ledger record, charging the growth of its
// service to its Slurm account; fairShare then gives each job its
// account's fair-share factor), rank (priority.Ranker, then fold
// each Result back into the record and into a Decision), and forget (close
// the records of jobs slurmctld no longer has). Fallback candidates are
// noted while accounting, since that stage sees every pending job.
func (c *Core) Pass(now int64, snaps []Snapshot, out []Decision) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.met.passDone(time.Now())
	if d := c.dist.Load(); d != c.rankerDist {
		before := c.ranker.Config().Thresholds
		if err := c.rebuildRanker(); err != nil {
			c.log.Error("new Gittins distribution rejected", keyErr, err)
		} else if !slices.Equal(before, c.ranker.Config().Thresholds) {
			c.logThresholds(slog.LevelDebug, "new distribution")
		}
	}
	c.fs.decay(now, c.cfg.Tiresias.FairShare.HalfLife)
	c.account(now, snaps, out)
	c.fairShare(snaps)
	c.rank(now, snaps, out)
	c.observeUsage(now, snaps, out)
	c.forget(now)
	c.signalWriter()
	return len(c.sizing.candidates)
}

// account is a pass's first stage: every snapshot updates its job's
// record; the jobs to rank (not finished, not held) are collected in c.jobs
// with their snapshot's index in c.jobIndex, and pending jobs that Synergy
// enlarged are noted as fallback candidates.
func (c *Core) account(now int64, snaps []Snapshot, out []Decision) {
	c.sizing.candidates = c.sizing.candidates[:0]
	clear(c.seen)
	c.jobs, c.jobIndex = c.jobs[:0], c.jobIndex[:0]
	for i := range snaps {
		s := &snaps[i]
		out[i] = Decision{}
		c.seen[s.ID] = true
		if c.finishedEarlier(s) {
			continue
		}
		// Before the marker: a task split off a job array carries the
		// marker of the array's record, from which a record is made.
		_, known := c.records[s.ID]
		c.restoreFromMarker(s)
		rec := c.observe(now, s)
		if s.State == StateFinished {
			continue
		}
		c.noteReady(now, s, rec, !known)
		c.inherit(s, rec)
		if s.Held {
			continue
		}
		if s.State == StatePending {
			c.noteCandidate(now, s)
		}
		j := policyJob(rec, s)
		j.Opportunistic = rec.Opportunistic(c.cfg.Sharing.Opportunistic(s.Partition))
		if j.Opportunistic && s.State == StatePending {
			j.Pair = c.pairScores[s.ID] // the last pass's (exclude.go)
		}
		c.joinSweep(s, rec, &j)
		c.jobs = append(c.jobs, j)
		c.jobIndex = append(c.jobIndex, i)
	}
}

// rank is a pass's second stage: the policy orders c.jobs, each Result is
// folded into the job's record (promotion, queue) and becomes its Decision.
func (c *Core) rank(now int64, snaps []Snapshot, out []Decision) {
	c.results = c.ranker.Rank(now, c.jobs, c.results[:0])
	w := c.cfg.Tiresias.Weights
	for k := range c.results {
		res := &c.results[k]
		s := &snaps[c.jobIndex[k]]
		rec := c.records[s.ID]
		before := *rec
		c.met.queueChange(rec.Queue, res.Queue, res.Promoted)
		c.met.opportunistic(res.Opportunistic, c.jobs[k].State == priority.Running, res.Upgraded)
		promoted, moved := rec.Apply(now, *res)
		switch {
		case promoted:
			c.log.Info("job promoted to queue 0 (starvation)", keyJob, s.ID, keyService, rec.Total())
		case moved:
			c.log.Info("job changed queue", keyJob, s.ID, keyQueue, res.Queue, keyService, rec.Total())
		}
		if before.Upgraded == 0 && rec.Upgraded != 0 {
			c.log.Info("opportunistic job upgraded to guaranteed after waiting (sharing.promote_after)", keyJob, s.ID,
				keyWaited, now-rec.WaitingSince, keyQueue, res.Queue)
		}
		if *rec != before {
			c.markDirty(rec)
		}
		d := decide(w, *res, rec.Total(), rec.QueueService())
		d.Marker = c.markerFor(s, rec)
		c.noteSweepIndex(s.ID, c.decisions[s.ID], d)
		c.decisions[s.ID] = d
		out[c.jobIndex[k]] = d
	}
	c.preemption.view.fromPass(c.jobs, c.results, func(k int) *Snapshot { return &snaps[c.jobIndex[k]] })
	c.preemption.view.orderVictims(c.cfg.Tiresias.Preemption, c.jobs, c.results, c.preemptions)
	c.showBlocked(now, out)
}

// preemptions is how many times the preemption rule had job id requeued,
// as its record says.
func (c *Core) preemptions(id uint32) int {
	if rec, ok := c.records[id]; ok {
		return rec.Preemptions
	}
	return 0
}

// forget is a pass's last stage: jobs slurmctld no longer has (purged
// before a pass saw them end) are finished, and decisions made by Enqueue
// for jobs that were gone before any pass (cancelled at once), which have
// no record, are dropped, and so are the SystemComment markers of jobs that
// are gone.
func (c *Core) forget(now int64) {
	for id, rec := range c.records {
		if !c.seen[id] {
			// How it ended is unknown; its key is the one it was ranked
			// with, if any.
			key := priority.HeirKey{User: rec.Sweep.User, Account: rec.Sweep.Account, GPUs: rec.Sweep.GPUs}
			c.finish(rec, now, false, key, rec.InSweep)
		}
	}
	for id := range c.decisions {
		if !c.seen[id] {
			delete(c.decisions, id)
		}
	}
	c.pruneMarkers()
	c.pruneFinished()
	c.forgetPreemptions()
	c.siblings.Prune(now)
	c.heirs.Prune(now)
	c.throttles.prune(now)
	for id := range c.ends.held {
		if !c.seen[id] {
			delete(c.ends.held, id)
		}
	}
}

// observe folds one snapshot into the job's ledger record and returns it.
// What a run, a requeue and a completion do to the service is
// priority.Account's; observe only maps Slurm's states onto it.
func (c *Core) observe(now int64, s *Snapshot) *ledger.Record {
	rec, ok := c.records[s.ID]
	if old := c.finished[s.ID]; !ok && old != nil && s.State != StateFinished {
		rec = c.reopen(now, old)
	} else if !ok {
		rec = &ledger.Record{JobID: s.ID, FirstSubmit: s.SubmitTime, Account: priority.NewAccount(s.SubmitTime)}
		c.records[s.ID] = rec
		c.markDirty(rec)
	}
	before := *rec
	// Whatever this observation adds to the job's service is its account's
	// usage (a node's report of an earlier end can only lower it: no
	// refund, usage decays anyway). A finished job is observed, and
	// charged, once: later passes skip it (finishedEarlier).
	defer func() { c.fs.charge(s.Account, rec.Total()-before.Total()) }()
	switch s.State {
	case StateRunning, StateSuspended:
		if rec.RunOpen && rec.RunStart == s.StartTime {
			// Still in the run a preemption was allowed to end: Slurm
			// requeues a victim in the scheduling cycle that asked, so
			// it took another; an admin's requeue later is no preemption.
			delete(c.preemption.notes, s.ID)
		}
		if rec.RunOpen && rec.RunStart != s.StartTime { // requeued and restarted since
			c.closeRequeuedRun(now, s, rec)
		}
		rec.ObserveRun(s.StartTime, c.charged(s, rec), s.runSeconds(now))
		c.weighRun(s, rec)
	case StatePending:
		if rec.RunOpen { // it ran since the last pass: requeued
			c.closeRequeuedRun(now, s, rec)
		}
	case StateFinished:
		if s.StartTime != 0 {
			// Its last run, which may have begun and ended between two
			// passes, up to the end its node reported if that is earlier
			// (jobend.go). Finished stays Slurm's end: it keys the
			// completed-job history, which later passes that still see
			// the job must find unchanged.
			rec.ObserveRun(s.StartTime, c.charged(s, rec), c.trueEnd(s, ok).runSeconds(now))
			c.weighRun(s, rec)
			c.noteKilled(s, rec)
		}
		end := s.EndTime
		if end == 0 {
			end = now
		}
		c.finish(rec, end, s.EndState == EndCompleted, heirKey(s), true)
		c.finished[s.ID] = rec
		return rec
	}
	if *rec != before {
		c.markDirty(rec)
	}
	return rec
}

// charged is the rate (GPUs, or GPU-equivalents for a job without GPUs)
// at which s's run accrues service. The rate is fixed when a run opens
// (Account.ObserveRun keeps the open run's), so it is logged only then.
func (c *Core) charged(s *Snapshot, rec *ledger.Record) uint32 {
	g := s.chargedGPUs(c.cfg.CPUJobCPUsPerGPU)
	if s.gpuCount() == 0 && (!rec.RunOpen || rec.RunStart != s.StartTime) {
		c.log.Info("job without GPUs charged in GPU-equivalents", keyJob, s.ID, keyJobCPUs, s.CPUs, keyCharged, g)
	}
	return g
}

// weighRun fixes, under effective service, the speed of a run that has
// none yet: the speed of the GPU type it holds for its model
// (priority.Speeds). The speed then weights the whole run (the run keeps
// its GPUs) and is saved with it in the ledger, so it is looked up and
// logged once per run. Runs opened while effective service was off keep
// plain GPU-seconds to their end.
func (c *Core) weighRun(s *Snapshot, rec *ledger.Record) {
	// A job without GPUs holds no GPU type: its GPU-equivalents stay as
	// charged.
	if !c.cfg.Tiresias.EffectiveService || !rec.RunOpen || rec.RunSpeed != 0 || s.Run == nil || s.gpuCount() == 0 {
		return
	}
	typ, model := s.Run.GPUType(), s.Run.ModelKey()
	sp := c.speedBase
	if c.agents != nil {
		sp.Profiled = c.agents.Throughputs()
	}
	speed, src := c.cfg.Tiresias.RunSpeed(&sp, model, typ)
	rec.SetRunSpeed(speed)
	c.log.Info("effective service: run weighted by its GPU type's speed", keyJob, s.ID,
		keyGPUType, typ, keyModel, model, keySpeed, speed, keySource, string(src))
}

// finish records a job's end and forgets it. completed says it ran to its
// end (Slurm's COMPLETED): only then is its GPU-time a sample for its
// sweep (priority.Siblings.Done). Its queue service is left for a job that
// replaces it to inherit (inherit.go), keyed by key when known.
func (c *Core) finish(rec *ledger.Record, when int64, completed bool, key priority.HeirKey, known bool) {
	from := rec.WaitingSince // it ended waiting: heirs are submitted after it began to
	if rec.RunOpen {
		from = rec.RunStart
		rec.LastRunStart, rec.LastRunGPUs, rec.LastRunSpeed = rec.RunStart, rec.RunGPUs, rec.RunSpeed
	}
	rec.CloseRun()
	rec.Finished = max(when, 1)
	if known {
		c.heirs.Ended(key, priority.Bequest{JobID: rec.JobID, Arrived: max(rec.Ready, rec.FirstSubmit), From: from, End: rec.Finished,
			Completed: completed, Service: rec.QueueService()})
	}
	rec.SweepSample = completed
	if completed {
		c.siblings.Done(rec.JobID, rec.Total())
	} else {
		c.siblings.Leave(rec.JobID)
	}
	c.markDirty(rec)
	delete(c.records, rec.JobID)
	delete(c.decisions, rec.JobID)
}

func policyJob(rec *ledger.Record, s *Snapshot) priority.Job {
	state := priority.Pending
	if s.State != StatePending {
		state = priority.Running
	}
	j := priority.Job{
		ID:           s.ID,
		State:        state,
		GPUs:         s.gpuCount(),
		SubmitTime:   rec.FirstSubmit,
		EligibleTime: s.BeginTime,
		Partition:    s.PartFactor,
		QOS:          s.QOSFactor,
		Nice:         s.Nice,
		Held:         s.Held,
		// Only before its first run: a requeued job's wait for its new
		// begin time is no arrival, and its place in its queue is its own.
		// Nor is a wait on its array's throttle of two or more: its
		// tasks are a sweep's members (inherit.go).
		Deferred: s.Deferred && rec.Runs == 0 && s.ArrayThrottle < 2,
	}
	rec.Describe(&j)
	return j
}

// Enqueue decides the priority of a job that slurmctld asks about between
// passes (at submit, release, requeue, update). A job ranked by the last
// pass keeps that pass's decision; a new one goes last into its queue.
func (c *Core) Enqueue(now int64, s *Snapshot) Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.decisions[s.ID]; ok && !s.Held {
		c.preemption.view.enqueued(s, d)
		return d
	}
	rec, known := c.records[s.ID]
	if !known {
		acct := priority.NewAccount(s.SubmitTime)
		acct.QueueEntry = now
		rec = &ledger.Record{JobID: s.ID, FirstSubmit: s.SubmitTime, Account: acct}
	}
	if b, heir := c.heirs.For(heirKey(s), s.ID, enqueueArrival(now, s, rec, known)); heir && b.Service > rec.Inherited {
		// A view: the pass that sees it inherits it for good.
		view := *rec
		view.ServiceClosed += b.Service - rec.Inherited
		rec = &view
	}
	j := policyJob(rec, s)
	j.Opportunistic = rec.Opportunistic(c.cfg.Sharing.Opportunistic(s.Partition))
	j.FairShare = c.enqueueFactor(s.Account, c.cfg.Tiresias.FairShare.SharesOf(s.Account, s.AccountShares))
	res := c.ranker.Standing(now, j)
	d := decide(c.cfg.Tiresias.Weights, res, rec.Total(), rec.QueueService())
	c.decisions[s.ID] = d
	c.preemption.view.enqueued(s, d)
	return d
}

// Decision returns the last decision for a job (for sprio).
func (c *Core) Decision(id uint32) (Decision, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.decisions[id]
	if !ok {
		return Decision{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	return d, nil
}

// Record returns a job's ledger record as the core holds it in memory.
func (c *Core) Record(id uint32) (ledger.Record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.records[id]
	if !ok {
		return ledger.Record{}, false
	}
	return *r, true
}

// Close stops the agent listener, flushes the ledger and stops the writer.
func (c *Core) Close() error {
	if c.metricsSrv != nil {
		c.metricsSrv.Close()
	}
	if c.agents != nil {
		if err := c.agents.Close(); err != nil {
			c.log.Error("closing the node-agent listener", keyErr, err)
		}
	}
	close(c.stop)
	<-c.stopped
	return c.store.Close()
}
