package gpushare

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
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
type requeueRequest struct {
	job     uint32
	node    string
	exclude bool
}

// SlurmJobs is what the requeuer asks of Slurm: SlurmCommands in slurmctld,
// a fake in tests.
type SlurmJobs interface {
	// Requeue requeues a running job.
	Requeue(ctx context.Context, job uint32) error
	// Excluded is the job's ExcNodeList as Slurm holds it ("" for none)
	// and whether the job is pending (the only state Slurm edits it in).
	Excluded(ctx context.Context, job uint32) (list string, pending bool, err error)
	// SetExcluded replaces the job's ExcNodeList ("" clears it).
	SetExcluded(ctx context.Context, job uint32, list string) error
	// Hostnames expands a Slurm host list ("n[1-3],m1").
	Hostnames(ctx context.Context, list string) ([]string, error)
}

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
// asked again by the next pass), then the job's exclusion (sent again by
// the next pass when it failed).
func (c *Sharing) carryOut(sj SlurmJobs, r requeueRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), requeueTimeout)
	defer cancel()
	if !r.exclude {
		if err := sj.Requeue(ctx, r.job); err != nil {
			c.log.Error("requeueing an opportunistic job failed", keyJob, r.job, keyErr, err)
			c.usage.mu.Lock()
			delete(c.usage.intro.asked, r.job) // the next pass asks again
			c.usage.mu.Unlock()
			return
		}
	}
	if err := c.applyExclusion(ctx, sj, r.job); err != nil {
		c.log.Error("updating a job's ExcNodeList failed; the next pass tries again", keyJob, r.job, keyErr, err)
		c.markStale(r.job)
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
		case r := <-c.usage.intro.queue:
			c.carryOut(sj, r)
			n++
		default:
			return n
		}
	}
}

// SlurmCommands runs Slurm's own commands, as SlurmUser (slurmctld's user
// may requeue and update any job), each bounded by the caller's context.
type SlurmCommands struct{}

// maxSlurmOutput bounds what is read of one command's output.
const maxSlurmOutput = 1 << 20

func runSlurm(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %.200s", name, strings.Join(args, " "), err, out.b)
	}
	if out.over {
		return "", fmt.Errorf("%s %s: output over %d bytes", name, strings.Join(args, " "), maxSlurmOutput)
	}
	return string(out.b), nil
}

// limitedBuffer keeps the first maxSlurmOutput bytes written to it.
type limitedBuffer struct {
	b    []byte
	over bool
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxSlurmOutput - len(l.b); room < len(p) {
		l.over = true
		p = p[:max(room, 0)]
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

func (SlurmCommands) Requeue(ctx context.Context, job uint32) error {
	_, err := runSlurm(ctx, "scontrol", "requeue", strconv.FormatUint(uint64(job), 10))
	return err
}

// Excluded reads the job's state and ExcNodeList with squeue's %T and %x:
// two fields no user text can hold (a node list has no spaces), unlike
// `scontrol show job`, whose one-line form has the job's name and comment
// unquoted beside them. A job just requeued shows as COMPLETING or
// REQUEUED while Slurm already counts it pending (and edits it), so only
// the states Slurm never edits count as not pending; a refusal by
// slurmctld is handled by the caller.
func (SlurmCommands) Excluded(ctx context.Context, job uint32) (string, bool, error) {
	out, err := runSlurm(ctx, "squeue", "-h", "-j", strconv.FormatUint(uint64(job), 10), "-o", "%T %x")
	if err != nil {
		return "", false, err
	}
	state, list, _ := strings.Cut(strings.TrimSpace(out), " ")
	switch state {
	case "", "RUNNING", "SUSPENDED", "STOPPED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
		"PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "SPECIAL_EXIT":
		return "", false, nil
	}
	return strings.TrimSpace(list), true, nil
}

func (SlurmCommands) SetExcluded(ctx context.Context, job uint32, list string) error {
	_, err := runSlurm(ctx, "scontrol", "update", "JobId="+strconv.FormatUint(uint64(job), 10), "ExcNodeList="+list)
	return err
}

func (SlurmCommands) Hostnames(ctx context.Context, list string) ([]string, error) {
	out, err := runSlurm(ctx, "scontrol", "show", "hostnames", list)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}
