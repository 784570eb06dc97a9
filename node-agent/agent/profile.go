package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profiler"
)

// Sentinel errors of profile requests.
var (
	// ErrRootRefused: root asked, and allow_root_profiling is off.
	ErrRootRefused = errors.New("profiling as root is refused: run lachesis-profiler as the user who owns the workload (or set allow_root_profiling in the agent's config)")
	// ErrBadRequest: the request cannot be run as given.
	ErrBadRequest = errors.New("bad profile request")
	// ErrNoAccess: the caller could not read what it asked the agent to.
	ErrNoAccess = errors.New("no access")
	// ErrSweepTooLong: a sweep ran past max_sweep_seconds and was stopped.
	ErrSweepTooLong = errors.New("sweep too long")

	errSweepTooLong = errors.New("max_sweep_seconds reached")
)

// Profile implements localapi.Handler: it runs one sweep as the caller.
func (a *Agent) Profile(ctx context.Context, caller localapi.Caller, req localapi.ProfileRequest, progress func(profiler.Progress)) (localapi.Result, error) {
	if caller.UID == 0 && !a.cfg.AllowRootProfiling {
		a.log.Warn("profile request from root refused", keyModel, req.Model)
		return localapi.Result{}, ErrRootRefused
	}
	if err := checkRequest(req); err != nil {
		return localapi.Result{}, err
	}
	if err := a.checkCaps(req); err != nil {
		return localapi.Result{}, err
	}
	u, err := a.deps.Users(caller.UID)
	if err != nil {
		return localapi.Result{}, fmt.Errorf("%w: uid %d: %v", ErrBadRequest, caller.UID, err)
	}
	// The sweep runs in the caller's own job on this node, confined and
	// charged as the job is; no job, no sweep.
	job, err := a.deps.CallerJob(ctx, caller, a.cfg.Node)
	if err != nil {
		a.log.Warn("profile request refused: not from a job of the caller's on this node",
			keyModel, req.Model, keyUID, caller.UID, keyErr, err)
		return localapi.Result{}, err
	}
	// The sweep ends with the job's step (Slurm would kill a workload in
	// the job's cgroups anyway; on nodes without them this stops it).
	ctx, endJob := context.WithCancelCause(ctx)
	defer endJob(nil)
	if job.StepPID > 0 {
		defer watchStep(job.StepPID, endJob)()
	}
	// The workload gets the caller's environment or none, never the
	// agent's (root's).
	env := req.Env
	if env == nil {
		env = []string{}
	}
	cred := &syscall.Credential{Uid: caller.UID, Gid: u.GID, Groups: u.Groups}
	// Whatever the agent opens for the request it opens as the caller
	// (profiler.AsUser): the kernel decides what they may read. These
	// checks give an early answer; the profiler opens as the user again.
	if req.DatasetPath != "" {
		if err := profiler.CheckDataset(req.DatasetPath, cred); err != nil {
			return localapi.Result{}, requestErr(err)
		}
	}
	// The command is found on the caller's PATH, as the caller, not on
	// the agent's (root's) PATH.
	argv := slices.Clone(req.Argv)
	if argv[0], err = profiler.LookPath(argv[0], env, req.Dir, cred); err != nil {
		return localapi.Result{}, requestErr(err)
	}
	point := a.cfg.MaxPointDuration
	if req.PointSeconds > 0 {
		point = time.Duration(req.PointSeconds * float64(time.Second))
	} else {
		point = max(min(profiler.DefaultPointDuration, point), a.cfg.MinPointDuration)
	}
	if err := a.queue.acquire(ctx, caller.UID, req.Model, func(p position) {
		if progress != nil {
			progress(profiler.Progress{Message: fmt.Sprintf("waiting: place %d in this node's queue; the profile of %s is running", p.place, p.running)})
		}
	}); err != nil {
		return localapi.Result{}, err
	}
	defer a.queue.release()

	runID := newRunID(a.cfg.Node)
	log := a.log.With(keyRun, runID, keyModel, req.Model, keyUser, u.Name)
	if err := a.spool.BeginRun(spool.Run{ID: runID, Model: req.Model, UID: caller.UID, User: u.Name, Argv: argv, Started: time.Now()}); err != nil {
		return localapi.Result{}, err
	}
	log.Info("profiling", keyUID, caller.UID, keyJob, job.ID)
	spec := profiler.SweepSpec{
		Argv: argv, Env: env, Dir: req.Dir, Regex: req.Regex,
		PointDuration: point,
		MaxCPUs:       req.MaxCPUs, Tolerance: req.Tolerance, DatasetPath: req.DatasetPath,
		GPUs: req.GPUs, NodeGPUs: max(a.cfg.NodeGPUs, req.GPUs), UseNVML: req.UseNVML,
		Credential: cred,
		Job:        &profiler.Job{ID: job.ID, PID: int(caller.PID)},
	}
	record := func(p profiler.Progress) {
		// Every measurement reaches the spool as soon as it is taken.
		if p.Point > 0 && p.CPUs > 0 {
			m := profile.Measurement{CPUs: p.CPUs, Throughput: p.Throughput}
			if err := a.spool.AddMeasurement(runID, p.Point, m, time.Now()); err != nil {
				log.Error("could not spool a measurement", keyErr, err)
			}
		}
		if progress != nil {
			progress(p)
		}
	}
	// max_sweep_seconds: one sweep holds the node's only slot, so no
	// sweep may hold it longer than the admin allows.
	sweepCtx, cancel := context.WithTimeoutCause(ctx, a.cfg.MaxSweepDuration, errSweepTooLong)
	defer cancel()
	rec, err := a.deps.Profile(sweepCtx, req.Model, spec, record)
	if err != nil {
		state := spool.RunFailed
		switch {
		case errors.Is(context.Cause(ctx), errJobEnded):
			err = fmt.Errorf("%w: %w", errJobEnded, err)
		case ctx.Err() != nil:
			state, err = spool.RunInterrupted, fmt.Errorf("cancelled: %w", err)
		case errors.Is(context.Cause(sweepCtx), errSweepTooLong):
			err = fmt.Errorf("%w: stopped after max_sweep_seconds (%v) of this node's agent; profile with a shorter --point-seconds or --max-cpus (%v)", ErrSweepTooLong, a.cfg.MaxSweepDuration, err)
		}
		a.met.runs.WithLabelValues(state).Inc()
		if serr := a.spool.FailRun(runID, state, err); serr != nil {
			log.Error("could not record the failed run", keyErr, serr)
		}
		log.Warn("profiling failed", keyErr, err)
		return localapi.Result{}, err
	}
	// The agent's view of who and where wins over the profiler's.
	rec.Node, rec.User, rec.UID, rec.Model = a.cfg.Node, u.Name, caller.UID, req.Model
	rec.GPUType = a.gpuType()
	if rec.ID == "" {
		rec.ID = runID
	}
	// A record the controller would refuse must fail here, where the user
	// sees why, not be retried forever from the spool.
	if err := (&wire.ProfileReport{Record: rec}).Validate(); err != nil {
		err = fmt.Errorf("the profiler produced an unusable record: %w", err)
		a.met.runs.WithLabelValues(outcomeFailed).Inc()
		if serr := a.spool.FailRun(runID, spool.RunFailed, err); serr != nil {
			log.Error("could not record the failed run", keyErr, serr)
		}
		log.Error("profiling failed", keyErr, err)
		return localapi.Result{}, err
	}
	if err := a.spool.FinishRun(runID, rec); err != nil {
		return localapi.Result{}, err
	}
	log.Info("profile spooled", keyID, rec.ID)
	a.met.runs.WithLabelValues(outcomeCompleted).Inc()
	a.deliverer.Kick()
	delivered, refused := a.awaitDelivery(ctx, rec.ID)
	return localapi.Result{
		ID: rec.ID, Model: rec.Model, User: rec.User, Points: len(rec.CPUSweep), Best: rec.Best,
		Delivered: delivered, Refused: refused,
	}, nil
}

func checkRequest(req localapi.ProfileRequest) error {
	switch {
	case strings.TrimSpace(req.Model) == "":
		return fmt.Errorf("%w: no model name", ErrBadRequest)
	case len(req.Model) > 256:
		return fmt.Errorf("%w: model name longer than 256 bytes", ErrBadRequest)
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return fmt.Errorf("%w: no command to profile", ErrBadRequest)
	case req.Dir != "" && !filepath.IsAbs(req.Dir):
		return fmt.Errorf("%w: working directory %q is not absolute", ErrBadRequest, req.Dir)
	case req.PointSeconds < 0 || req.GPUs < 0 || req.MaxCPUs < 0:
		return fmt.Errorf("%w: negative duration or count", ErrBadRequest)
	case req.DatasetPath != "" && !filepath.IsAbs(req.DatasetPath):
		return fmt.Errorf("%w: dataset %q is not an absolute path", ErrBadRequest, req.DatasetPath)
	}
	return nil
}

// checkCaps refuses a request that would hold the node's sweep slot
// longer than its admin allows.
func (a *Agent) checkCaps(req localapi.ProfileRequest) error {
	if limit := a.cfg.MaxPointDuration.Seconds(); !(req.PointSeconds <= limit) {
		return fmt.Errorf("%w: --point-seconds %g is above this node's max_point_seconds (%g)", ErrBadRequest, req.PointSeconds, limit)
	}
	if least := a.cfg.MinPointDuration.Seconds(); req.PointSeconds != 0 && req.PointSeconds < least {
		return fmt.Errorf("%w: --point-seconds %g is below this node's min_point_seconds (%g)", ErrBadRequest, req.PointSeconds, least)
	}
	return nil
}

// requestErr maps the profiler's sentinels onto the agent's.
func requestErr(err error) error {
	switch {
	case errors.Is(err, profiler.ErrNoAccess):
		return fmt.Errorf("%w: %w", ErrNoAccess, err)
	case errors.Is(err, profiler.ErrBadSpec):
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	return err
}

// awaitDelivery waits for the deliverer's first attempt at id and reports
// whether the controller acknowledged it, or why it refused it for good.
func (a *Agent) awaitDelivery(ctx context.Context, id string) (delivered bool, refused string) {
	deadline := time.Now().Add(a.cfg.Delivery.Timeout + time.Second)
	for {
		e, ok, err := a.spool.Get(id)
		if err == nil && ok && (!e.Delivered.IsZero() || e.Attempts > 0) {
			if !e.Refused.IsZero() {
				return false, e.LastError
			}
			return !e.Delivered.IsZero(), ""
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false, ""
		}
		time.Sleep(50 * time.Millisecond)
	}
}
