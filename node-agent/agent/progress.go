package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/localapi"
)

var _ localapi.ProgressHandler = (*Agent)(nil)

// ErrProgressOff: this agent was started without a progress tracker.
var ErrProgressOff = errors.New("this node agent does not track progress")

// ReportProgress implements localapi.ProgressHandler: the count is the
// job's whose step the calling process runs in, found from the kernel's
// view of the process (procjob: its root slurmstepd, its job_<id>
// cgroups) and owned by the
// caller's uid; nothing in the request names a job. Refusals are logged at
// debug level only: any local user can send them as fast as they like,
// and the reports metric counts them.
func (a *Agent) ReportProgress(ctx context.Context, caller localapi.Caller, rep localapi.ProgressReport) (localapi.ProgressAnswer, error) {
	t := a.deps.ProgressTracker
	if t == nil {
		return localapi.ProgressAnswer{}, ErrProgressOff
	}
	job, err := a.progressJob(ctx, caller, a.cfg.Node)
	if err != nil {
		t.Refused()
		a.log.Debug("progress report refused: not from a job of the caller's", keyUID, caller.UID, "pid", caller.PID, keyErr, err)
		// ErrNoJob's own text is about profiling: keep only its detail.
		detail := err.Error()
		if errors.Is(err, ErrNoJob) {
			detail = strings.TrimSpace(strings.TrimPrefix(detail, ErrNoJob.Error()))
		}
		return localapi.ProgressAnswer{}, fmt.Errorf("%w: progress is reported from inside a Slurm job of yours on this node%s", localapi.ErrNotAllowed, strings.TrimRight(" "+detail, " "))
	}
	p, err := t.Report(job.ID, rep.Iterations, time.Now())
	if err != nil {
		a.log.Debug("progress report dropped", keyJob, job.ID, keyErr, err)
		return localapi.ProgressAnswer{}, err
	}
	return localapi.ProgressAnswer{JobID: job.ID, Iterations: p.Iterations, ItersPerSec: p.ItersPerSec}, nil
}

// forgetProgress drops what the agent keeps of job's progress: it ended.
func (a *Agent) forgetProgress(job uint32) {
	if a.deps.ProgressTracker != nil {
		a.deps.ProgressTracker.Forget(job)
	}
	if a.owners != nil {
		a.owners.forget(job)
	}
}

// Owner cache bounds. A progress report comes every few seconds from each
// reporting job, and squeue takes tens of milliseconds to seconds (it asks
// slurmctld): asking for every report would load the controller with
// every node's jobs. What is cached is only Slurm's answer "job J runs on
// this node and belongs to uid U", per job; every report still walks the
// caller's own process ancestry to root's slurmstepd for J and checks its
// cgroups, which is where forgery would happen. That answer cannot turn
// wrong within the TTL in a way that matters: a job's owner never
// changes, and a job id is not given to another job while the first one
// exists (slurmctld numbers jobs upwards, wrapping after MaxJobId); if J
// ends, no process of the caller's descends from J's slurmstepd any more,
// and its job-end report (jobend.go) drops the entry at once. Refusals
// are cached for a shorter time, so a caller hammering the socket from a
// job that is ending costs one squeue per ownerNegativeTTL.
const (
	ownerTTL         = 60 * time.Second
	ownerNegativeTTL = 5 * time.Second
	maxOwnerEntries  = 1024
)

// ownerCache remembers runningJobOwner's answers per job.
type ownerCache struct {
	lookup jobOwnerFunc
	now    func() time.Time

	mu sync.Mutex
	m  map[uint32]ownerEntry
}

type ownerEntry struct {
	uid   uint32
	err   error
	until time.Time
}

func newOwnerCache(lookup jobOwnerFunc) *ownerCache {
	return &ownerCache{lookup: lookup, now: time.Now, m: map[uint32]ownerEntry{}}
}

// owner is a jobOwnerFunc answering from the cache where it can.
func (c *ownerCache) owner(ctx context.Context, id uint32, node string) (uint32, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.uid, e.err
	}
	uid, err := c.lookup(ctx, id, node)
	if err != nil && ctx.Err() != nil {
		return 0, err // the caller went away: say nothing about the job
	}
	e = ownerEntry{uid: uid, err: err, until: now.Add(ownerTTL)}
	if err != nil {
		e.until = now.Add(ownerNegativeTTL)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxOwnerEntries {
		for k, old := range c.m {
			if !now.Before(old.until) {
				delete(c.m, k)
			}
		}
	}
	if len(c.m) >= maxOwnerEntries {
		// Every entry is live: drop any one; it is only a cache.
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[id] = e
	return uid, err
}

func (c *ownerCache) forget(id uint32) {
	c.mu.Lock()
	delete(c.m, id)
	c.mu.Unlock()
}

// callerJob is SlurmCallerJob with the owner from the cache.
func (c *ownerCache) callerJob(ctx context.Context, caller localapi.Caller, node string) (CallerJob, error) {
	return slurmCallerJob(ctx, caller, node, c.owner)
}
