package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/internal/util/metricsrv"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/node-agent/jobprogress"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profiler"
)

// ProfileFunc runs a profiling sweep (profiler.Profile).
type ProfileFunc func(ctx context.Context, model string, spec profiler.SweepSpec, progress func(profiler.Progress)) (profile.Record, error)

// Deps are the agent's ties to the outside world.
type Deps struct {
	// Signer makes the munge credentials of reports.
	Signer wire.Signer
	// Profile runs sweeps; profiler.Profile in production.
	Profile ProfileFunc
	// Telemetry samples GPUs; nil means no telemetry.
	Telemetry telemetry.Source
	// Processes lists the processes on the GPUs, for per-job GPU use
	// (gpuuse.go); nil means none is measured.
	Processes telemetry.ProcessSource
	// ProcessJob maps a GPU process to its job; nil means
	// procjob.GPUProcessJob.
	ProcessJob ProcessJobLookup
	// Progress says how far jobs that opted in got, for per-job GPU use
	// reports; nil means ProgressTracker's, if there is one.
	Progress ProgressSource
	// Users resolves uids; nil means the system's user database.
	Users UserLookup
	// CallerJob finds the Slurm job a profile request came from, which the
	// sweep runs in; nil means SlurmCallerJob.
	CallerJob JobLookup
	// NodeGres returns this node's configured GRES as scontrol prints it
	// (ScontrolGres in production), for the GPU type of profiles
	// (gputype.go); nil means unknown.
	NodeGres func() (string, error)
	// ProgressTracker turns the iteration counts jobs report on the
	// agent's socket into rates (progress.go); nil means progress
	// reports are refused.
	ProgressTracker *jobprogress.Tracker
}

// Log keys.
const (
	keyModel = "model"
	keyID    = "id"
	keyUser  = "user"
	keyUID   = "uid"
	keyErr   = "err"
	keyRun   = "run"
	keyNode  = "node"
	keyCtl   = "controller"
	keyCount = "runs"
	keyGPUs  = "gpus"
	keyJob   = "job"
)

// Agent is a running node agent.
type Agent struct {
	cfg       config.Config
	deps      Deps
	log       *slog.Logger
	spool     *spool.Spool
	sender    *deliver.Client
	deliverer *deliver.Deliverer
	met       *agentMetrics    // metrics.go
	jobEnds   *deliver.JobEnds // jobend.go
	// queue admits one sweep at a time (two sweeps on one node would
	// measure each other), fairly across users.
	queue *sweepQueue
	// progressJob finds the job a progress report came from: the caller
	// lookup with Slurm's answers cached (owners; progress.go), or
	// Deps.CallerJob where a test gave one.
	progressJob JobLookup
	owners      *ownerCache

	mu        sync.Mutex
	telemetry string // telemetry state, for Status
}

var (
	_ localapi.Handler = (*Agent)(nil)
	// munge.Client is the Signer cmd/lachesis-node-agent wires in.
	_ wire.Signer = (*munge.Client)(nil)
)

// New opens the spool and prepares the agent; Run starts it.
func New(cfg config.Config, deps Deps, log *slog.Logger) (*Agent, error) {
	if deps.Signer == nil || deps.Profile == nil {
		return nil, errors.New("agent: Deps.Signer and Deps.Profile are required")
	}
	if deps.Users == nil {
		deps.Users = SystemUsers
	}
	progressJob, owners := deps.CallerJob, (*ownerCache)(nil)
	if deps.CallerJob == nil {
		deps.CallerJob = SlurmCallerJob
		owners = newOwnerCache(runningJobOwner)
		progressJob = owners.callerJob
	}
	sp, err := spool.Open(cfg.Spool)
	if err != nil {
		return nil, err
	}
	sender := &deliver.Client{
		Addr: cfg.Controller, Signer: deps.Signer,
		Timeout: cfg.Delivery.Timeout, MaxFrameBytes: cfg.Delivery.MaxFrameBytes,
	}
	if deps.Progress == nil && deps.ProgressTracker != nil {
		deps.Progress = deps.ProgressTracker
	}
	met := newAgentMetrics(sp, deps.Telemetry, deps.Processes, deps.ProgressTracker)
	counted := countingSender{Sender: sender, failures: met.failures.WithLabelValues(kindProfile)}
	return &Agent{
		cfg:         cfg,
		deps:        deps,
		log:         log,
		spool:       sp,
		sender:      sender,
		deliverer:   deliver.New(sp, counted, cfg.Delivery.RetryMin, cfg.Delivery.RetryMax, log),
		jobEnds:     deliver.NewJobEnds(sp, sender, cfg.Delivery.RetryMin, cfg.Delivery.RetryMax, log),
		queue:       newSweepQueue(),
		met:         met,
		progressJob: progressJob,
		owners:      owners,
		telemetry:   "off",
	}, nil
}

// Run serves until ctx is done, then stops everything and closes the spool.
func (a *Agent) Run(ctx context.Context) error {
	defer a.spool.Close()
	if n, err := a.spool.InterruptRuns(); err != nil {
		return err
	} else if n > 0 {
		a.log.Warn("runs interrupted by the agent's last stop", keyCount, n)
	}
	api, err := localapi.Listen(a.cfg.Socket, a, a.log)
	if err != nil {
		return err
	}
	if a.cfg.MetricsListen != "" {
		ms, err := metricsrv.Start(a.cfg.MetricsListen, a.met.reg, a.log)
		if err != nil {
			api.Close()
			return err
		}
		defer ms.Close()
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); a.deliverer.Run(ctx) }()
	go func() { defer wg.Done(); a.jobEnds.Run(ctx) }()
	go func() { defer wg.Done(); a.reportTelemetry(ctx) }()
	go func() { defer wg.Done(); a.reportGPUUse(ctx) }()
	a.log.Info("node agent running", keyNode, a.cfg.Node, keyCtl, a.cfg.Controller)
	<-ctx.Done()
	// Closing the API cancels sweeps in progress; their workloads are
	// killed by the profiler and the runs marked failed.
	api.Close()
	cancel()
	wg.Wait()
	if a.deps.Telemetry != nil {
		a.deps.Telemetry.Close()
	}
	a.log.Info("node agent stopped")
	return nil
}

// Status implements localapi.Handler.
func (a *Agent) Status(caller localapi.Caller) (localapi.Status, error) {
	c, err := a.spool.Count()
	if err != nil {
		return localapi.Status{}, err
	}
	running, queued := a.queue.state(caller.UID)
	a.mu.Lock()
	defer a.mu.Unlock()
	return localapi.Status{
		Node: a.cfg.Node, Controller: a.cfg.Controller,
		Pending: c.Pending, Delivered: c.Delivered,
		Telemetry: a.telemetry, Running: running, Queued: queued,
	}, nil
}

// reportTelemetry sends a GPU sample every interval, best effort: samples
// are not spooled, the next one supersedes a lost one.
func (a *Agent) reportTelemetry(ctx context.Context) {
	src := a.deps.Telemetry
	if a.cfg.TelemetryInterval == 0 || src == nil {
		return
	}
	a.setTelemetry("on")
	t := time.NewTicker(a.cfg.TelemetryInterval)
	defer t.Stop()
	failing := false
	for {
		gpus, err := src.Sample()
		switch {
		case errors.Is(err, telemetry.ErrNoDriver):
			// Open already said so, once.
			a.setTelemetry("off: no NVIDIA driver")
			return
		case err != nil:
			a.setTelemetry("failing: " + err.Error())
			if !failing {
				a.log.Warn("GPU telemetry sample failed", keyErr, err)
			}
			failing = true
		default:
			rep := &wire.TelemetryReport{Node: a.cfg.Node, GPUs: gpus, At: time.Now()}
			if _, err := a.sender.Send(ctx, wire.TypeTelemetry, rep); err != nil {
				if ctx.Err() != nil {
					return
				}
				a.met.failures.WithLabelValues(kindTelem).Inc()
				a.setTelemetry("not delivered: " + err.Error())
				if !failing {
					a.log.Warn("GPU telemetry not delivered", keyErr, err)
				}
				failing = true
			} else {
				if failing {
					a.log.Info("GPU telemetry delivered again", keyGPUs, len(gpus))
				}
				failing = false
				a.setTelemetry(fmt.Sprintf("on: %d GPUs", len(gpus)))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) setTelemetry(s string) {
	a.mu.Lock()
	a.telemetry = s
	a.mu.Unlock()
}

// newRunID names a run: node, time, and randomness against collisions.
func newRunID(node string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%s-%x", node, time.Now().UTC().Format("20060102T150405"), b)
}
