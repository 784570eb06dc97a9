package gpushare

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
)

// The requeuer: what a pass decides about running and waiting jobs of
// other users (a guest's requeue, a waiting guest's ExcNodeList) is
// carried out here, by Slurm's own commands, outside every lock of
// slurmctld's and of sharing's.

const (
	// requeueQueue bounds the requests waiting for the requeuer
	// goroutine; a pass never blocks on it (a full queue drops the
	// request, and the next pass asks again).
	requeueQueue = 64
	// requeueTimeout bounds one request's Slurm commands.
	requeueTimeout = 30 * time.Second
)

// requeueRequest asks the requeuer to take a guest off its host's node
// (requeue it, then apply its exclusion), or with exclude only to bring
// a waiting job's ExcNodeList to what the pass wants (exclude.go).
//
// With reclaim, the job is a borrower a quota owner takes its GPUs back
// from (the core's quota reclaim): requeued, nothing else.
type requeueRequest struct {
	job     uint32
	node    string
	exclude bool
	// requeued, with a requeue, counts and logs it once Slurm has carried
	// it out (never before: a refused requeue is not one); why says why
	// the guest must leave, for the log line of a guest ended instead.
	requeued func()
	why      string
	// reclaim: a quota reclaim's victim (RequeueForReclaim), any job's.
	reclaim bool
}

// SlurmJobs is what the requeuer asks of Slurm: slurmcmd.Runner, the one
// runner of Slurm's commands, in slurmctld; a fake in tests.
type SlurmJobs interface {
	// Requeue requeues a running job; a job that can never be requeued
	// (not a batch job, or --no-requeue) wraps slurmcmd.ErrNotRequeueable.
	Requeue(ctx context.Context, job uint32) error
	// Cancel ends a job.
	Cancel(ctx context.Context, job uint32) error
	// ExcNodeList is the job's ExcNodeList as Slurm holds it ("" for
	// none) and whether the job is pending (the only state Slurm edits it
	// in).
	ExcNodeList(ctx context.Context, job uint32) (list string, pending bool, err error)
	// SetExcNodeList replaces the job's ExcNodeList ("" clears it); a
	// refusal because the job no longer waits wraps
	// slurmcmd.ErrJobNotPending.
	SetExcNodeList(ctx context.Context, job uint32, list string) error
	// Hostnames expands a Slurm host list ("n[1-3],m1").
	Hostnames(ctx context.Context, list string) ([]string, error)
}

var _ SlurmJobs = slurmcmd.Runner{}

// requeuer runs what the pass queued, one request at a time, until stop
// closes: a revert's requeue and then its guest's exclusion, or an
// exclusion alone. Its own goroutine (safego), never under a lock; each
// request's Slurm commands share one requeueTimeout.
//
// Why scontrol in a goroutine rather than Slurm's job_requeue() from the
// pass: job_requeue() needs slurmctld's job and node write locks and
// sends RPCs to the job's nodes (the kill), which the pass must not do
// under the locks it holds (nothing under slurmctld's locks may block);
// preempt/tiresias only answers Slurm's questions and never requeues by
// itself. scontrol goes through slurmctld's ordinary RPC, which takes
// those locks itself, as an admin's requeue would (slurmctld's SlurmUser
// may requeue and update any job). A requeued job is held for Slurm's
// requeue delay (about two minutes) before it may start again, so the
// ExcNodeList update lands while it is pending.
func (c *Sharing) requeuer(stop <-chan struct{}, queue <-chan requeueRequest, sj SlurmJobs) {
	for {
		select {
		case <-stop:
			return
		case r := <-queue:
			c.carryOut(sj, r)
		}
	}
}

// carryOut runs one request: the requeue of a revert (a failed one is
// asked again by the next pass; a guest that can never be requeued is
// ended instead), then the job's exclusion (sent again by the next pass
// when it failed).
func (c *Sharing) carryOut(sj SlurmJobs, r requeueRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), requeueTimeout)
	defer cancel()
	if r.reclaim {
		if err := sj.Requeue(ctx, r.job); err != nil {
			c.log.Error("requeueing a borrower for a quota reclaim failed; the next pass chooses again", keyJob, r.job, keyErr, err)
		}
		return
	}
	if !r.exclude {
		err := sj.Requeue(ctx, r.job)
		if errors.Is(err, slurmcmd.ErrNotRequeueable) {
			c.endUnrequeueable(ctx, sj, r, err)
			return
		}
		if err != nil {
			c.log.Error("requeueing an opportunistic job failed; the next pass asks again", keyJob, r.job, keyErr, err)
			c.mu.Lock()
			delete(c.intro.asked, r.job) // the next pass asks again
			c.mu.Unlock()
			return
		}
		if r.requeued != nil {
			r.requeued()
		}
	}
	if err := c.applyExclusion(ctx, sj, r.job); err != nil {
		c.log.Error("updating a job's ExcNodeList failed; the next pass tries again", keyJob, r.job, keyErr, err)
		c.markStale(r.job)
	}
}

// RequeueForReclaim hands the requeue of a borrower that a quota reclaim
// evicts (the core chose it, within quota.max_reclaim_per_pass) to the
// requeuer, without blocking: false when its queue is full, and the next
// pass chooses again.
func (c *Sharing) RequeueForReclaim(job uint32) bool {
	select {
	case c.intro.queue <- requeueRequest{job: job, reclaim: true}:
		return true
	default:
		return false
	}
}

// CarryOutQueued runs the requests queued so far, one after the other, as
// the requeuer goroutine would, and returns how many: for a caller that
// plays Slurm itself (a replay of the simulator's history in tests). Not
// under slurmctld's locks.
func (c *Sharing) CarryOutQueued(sj SlurmJobs) int {
	n := 0
	for {
		select {
		case r := <-c.intro.queue:
			c.carryOut(sj, r)
			n++
		default:
			return n
		}
	}
}

// endUnrequeueable ends a guest that must leave its GPU and that Slurm
// will never requeue: an interactive job (srun, salloc) or one submitted
// with --no-requeue (or changed to it since) in the opportunistic
// partition. A guest yields to the guaranteed job beside it (AntMan's
// contract); one that cannot be requeued would otherwise stay for good,
// asked again at every pass. It is cancelled, with the reason logged; it
// is not counted as a requeue. A failed cancel is asked again by the next
// pass.
func (c *Sharing) endUnrequeueable(ctx context.Context, sj SlurmJobs, r requeueRequest, refused error) {
	if err := sj.Cancel(ctx, r.job); err != nil {
		c.log.Error("ending an opportunistic job that cannot be requeued failed; the next pass asks again", keyJob, r.job, keyErr, err)
		c.mu.Lock()
		delete(c.intro.asked, r.job)
		c.mu.Unlock()
		return
	}
	c.log.Info(fmt.Sprintf("job %d cancelled: it had to leave its GPU (%s) and Slurm cannot requeue it "+
		"(an interactive job or --no-requeue in the opportunistic partition)", r.job, r.why),
		keyJob, r.job, keyErr, refused)
}
