package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
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
//
// Its locks, and the one order they nest in (a lock is never taken while
// a later one is held):
//
//	mu             the pass, Enqueue, sprio, the preempt plugin's questions,
//	               placement, the config
//	  pendMu       what the writer goroutine takes next: queued records,
//	               the fair-share table, nodes' end corrections
//	  share's      gpushare's own (per-job GPU use and sharing: Judge under
//	               mu; a node's report, SizeJob's shard lookup and the
//	               requeuer take them alone), in their order (gpushare)
//
// The writer goroutine takes each alone, never nested, and never mu while
// it holds pendMu; a node's report (ReportGPUUse, ReportEnd) never waits
// for a pass's mu to reach sharing's.
type Core struct {
	log        *slog.Logger
	configPath string
	env        Env
	store      Ledger

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
	quota      quotaState      // quota standing and reclaims between passes (quota.go)
	cluster    clusterState    // the nodes' GPUs and the quotas bound to them (cluster.go)
	// quotaSource: quotas read from slurmdbd (quotasource.go); its own
	// goroutine, its state under mu.
	quotaSource quotaSourceState
	topo        topologyState // slurmctld's leaf switches, read apart (quotatopo.go)
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

	// ends: the true ends nodes reported (jobend.go).
	ends jobEnds
	// sharing: GPU sharing and per-job GPU use (gpushare), a stage of the
	// pass; its own state and locks.
	sharing *gpushare.Sharing
	// sharingJobs: scratch, the pass's jobs as sharing reads them; under mu.
	sharingJobs []gpushare.Job
	// pairScores: each waiting opportunistic job's pair score from the
	// last pass (gpushare), read by the next pass's ranking; under mu.
	pairScores map[uint32]float64

	// finished: jobs a pass saw finish that slurmctld still lists, with
	// their records, which continue if the job is requeued (finished.go);
	// under mu.
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
	// pendAccountUsage is the latest fair-share table for the writer; under
	// pendMu, saved when accountUsageDirty.
	pendAccountUsage  []ledger.AccountUsage
	accountUsageDirty bool
	kick              chan struct{}
	stop              chan struct{}
	stopped           chan struct{}
}

// Ledger is what the core keeps in its store (internal/controller/ledger),
// each capability named by the part that uses it; ledger.SQLite has them
// all, checked here, so a store without one does not compile.
type Ledger interface {
	ledger.Store                // records, the completed-job history, fair-share usage (writer.go)
	ledger.FinishedRecordLister // the jobs that finished before a restart (finished.go)
	ledger.SweepLister          // the sweeps' ended members (siblings.go)
	ledger.EndCorrector         // a node's true end of a completed job (jobend.go)
	fileStore                   // a ledger file deleted or replaced (writer.go)
	gpushare.Store              // per-job GPU use and sharing (gpushare)
}

var _ Ledger = (*ledger.SQLite)(nil)

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
	c.agents.SetJobUsageHandler(c.sharing.ReportGPUUse)
	// Sharing's requeues run here, outside slurmctld's locks (gpushare's
	// requeuer says why).
	safego.Loop(log, "sharing requeuer", func() { c.sharing.RunRequeuer(c.stop, slurmcmd.Runner{}) }, nil)
	// The quotas' source, outside every lock (quotasource.go).
	c.quotaSource.kick = make(chan struct{}, 1)
	safego.Loop(log, "quota source", func() { c.runQuotaSource(c.stop, slurmcmd.Runner{}) }, nil)
	c.startTopology(slurmcmd.Runner{})
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
func New(cfg config.Config, store Ledger, log *slog.Logger) (*Core, error) {
	active, err := store.Active()
	if err != nil {
		return nil, err
	}
	c := &Core{
		clock:       func() int64 { return time.Now().Unix() },
		log:         log,
		store:       store,
		cfg:         cfg,
		records:     make(map[uint32]*ledger.Record, len(active)),
		decisions:   make(map[uint32]Decision, len(active)),
		seen:        make(map[uint32]bool, len(active)),
		ends:        jobEnds{held: make(map[uint32]int64)},
		finished:    make(map[uint32]*ledger.Record),
		pending:     make(map[uint32]ledger.Record),
		kick:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
		sharing:     gpushare.New(cfg, log),
		pairScores:  map[uint32]float64{},
		throttles:   arrayThrottles{},
		quotaSource: newQuotaSource(),
	}
	c.met = newMetricsIf(cfg.Metrics.Listen, append(c.sharing.Collectors(), c.quotaSource.collectors()...)...)
	c.minHistory.Store(int64(cfg.GittinsMinHistory))
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
	if err := c.sharing.Restore(store, c.clock()); err != nil {
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
	t := c.cfg.Tiresias
	t.Quotas = c.quotasOn()
	r, err := priority.NewRanker(t, dist)
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
	c.carrySlurmdbdQuotas(&cfg)
	// The new quotas must fit the cluster Slurm has (when the plugin
	// has sent it): else the previous config stays, naming the key.
	var binding *boundQuotas
	if c.cluster.nodes != nil {
		if binding, err = bindQuotas(c.configPath, cfg.Quota, c.cluster.nodes, c.topo.leaves); err != nil {
			c.log.Error("reconfigure failed, keeping the previous config", keyErr, err)
			return err
		}
	}
	old, oldBinding := c.cfg, c.cluster.binding
	c.cfg = cfg
	c.cluster.binding = binding
	c.cluster.refused, c.cluster.refusedErr = nil, nil // judged by the old quotas
	c.minHistory.Store(int64(cfg.GittinsMinHistory))
	if err := c.rebuildRanker(); err != nil {
		c.cfg, c.cluster.binding = old, oldBinding
		c.minHistory.Store(int64(old.GittinsMinHistory))
		c.log.Error("reconfigure failed, keeping the previous config", keyErr, err)
		return err
	}
	c.speedBase = *cfg.Speeds(nil)
	c.resizeSweeps(old.Tiresias.SiblingWindow, cfg.Tiresias.SiblingWindow)
	c.resizeHeirs(old.Tiresias, cfg.Tiresias)
	c.log.Info("lachesis config reloaded", keyPath, c.configPath)
	c.logThresholds(slog.LevelInfo, "reload")
	c.kickQuotaSource() // slurmdbd's quotas read again, or lachesis.yaml's marked read
	if binding != nil {
		c.logBinding(binding, "reconfigure")
	}
	c.askTopology() // topology.conf is re-read by a reconfigure too
	return nil
}

// Pass ranks every job in one call: it updates each job's attained service
// from what slurmctld reports, decides queues and priorities, and writes one
// Decision per snapshot into out (Priority 0 = leave the job alone). It does
// no I/O: ledger changes go to the writer goroutine. It returns how many
// pending jobs are candidates for the Synergy fallback (see Fallback).
//
// A pass is five stages, each a method of its own, in this order
// (docs/architecture.md, flow 2):
//
//  1. account: every snapshot is folded into its job's ledger record, the
//     growth of its service charged to its Slurm account; the jobs to
//     rank are collected, start-time sizing's candidates noted;
//  2. fairShare: each job to rank gets its account's fair-share factor;
//     classifyQuotas (with a quota section): each GPU job within its
//     account's quota or borrowing (quota.go);
//  3. rank: priority.Ranker orders them, each Result is folded back into
//     its record and becomes its Decision, with the preemption view and
//     the reasons of refused preemptions; reclaim (with a quota
//     section): borrowers requeued for waiting within-quota jobs;
//  4. judgeSharing: GPU sharing and per-job GPU use (gpushare) judge the
//     ranked jobs, and their answers join the decisions;
//  5. forget: the records of jobs slurmctld no longer has are closed.
func (c *Core) Pass(now int64, snaps []Snapshot, out []Decision) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.met.passDone(time.Now())
	c.account(now, snaps, out)
	c.fairShare(snaps)
	c.classifyQuotas(snaps)
	c.rank(now, snaps, out)
	c.reclaim(now, snaps, out)
	c.judgeSharing(now, snaps, out)
	c.forget(now)
	c.signalWriter()
	return len(c.sizing.candidates)
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
	j.Quota = c.enqueueQuotaClass(s)
	res := c.ranker.Standing(now, j)
	d := decide(c.cfg.Tiresias.Weights, res, rec.Total(), rec.QueueService())
	c.decisions[s.ID] = d
	c.preemption.view.enqueued(s, d)
	if t, ok := c.preemption.view.gpu[s.ID]; ok && j.Quota != priority.QuotaOff {
		t.quota, t.account = j.Quota, strings.ToLower(s.Account)
		c.preemption.view.gpu[s.ID] = t
	}
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
