package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// ErrNoJob: the caller holds no running Slurm job on this node that the
// request came from. Profiling runs inside the caller's own allocation,
// charged and confined like any of their jobs, so it needs one.
var ErrNoJob = errors.New("profiling runs inside a Slurm job of yours on this node, and this request came from none: " +
	"run `lachesis-profiler profile …` where SLURM_JOB_ID is unset and it submits its own job with srun " +
	"(pass Slurm options with --srun-args), or run it inside a job of yours (srun, sbatch or salloc with the GPUs and CPUs to profile on)")

// CallerJob is the Slurm job a profile request came from.
type CallerJob struct {
	ID uint32
	// StepPID is the slurmstepd of the caller's step, 0 where not known:
	// the sweep ends when it does.
	StepPID int
}

// JobLookup finds the running job of caller on node; it fails with
// ErrNoJob when there is none (SlurmCallerJob in production).
type JobLookup func(ctx context.Context, caller localapi.Caller, node string) (CallerJob, error)

// SlurmCallerJob finds the caller's job from the kernel's view of its
// process (procjob's rule for a request: its nearest ancestor that is a
// root slurmstepd names the job, its job_<id> cgroups where it has any
// include it), then asks Slurm (squeue) that the job runs on node and
// belongs to the caller's uid.
func SlurmCallerJob(ctx context.Context, caller localapi.Caller, node string) (CallerJob, error) {
	return slurmCallerJob(ctx, caller, node, runningJobOwner)
}

// jobOwnerFunc asks who owns job id if it runs on node (runningJobOwner).
type jobOwnerFunc func(ctx context.Context, id uint32, node string) (uint32, error)

// slurmCallerJob is SlurmCallerJob with Slurm's answer from owner.
func slurmCallerJob(ctx context.Context, caller localapi.Caller, node string, owner jobOwnerFunc) (CallerJob, error) {
	pid := int(caller.PID)
	if pid <= 0 {
		return CallerJob{}, fmt.Errorf("%w (the caller's pid is unknown)", ErrNoJob)
	}
	p, err := procjob.Read(pid)
	if err != nil {
		return CallerJob{}, ErrNoJob
	}
	id, err := p.RequestJob()
	switch {
	case errors.Is(err, procjob.ErrNoStep):
		return CallerJob{}, ErrNoJob
	case err != nil:
		return CallerJob{}, fmt.Errorf("%w (%v)", ErrNoJob, err)
	}
	uid, err := owner(ctx, id, node)
	if err != nil {
		return CallerJob{}, err
	}
	if uid != caller.UID {
		return CallerJob{}, fmt.Errorf("%w (job %d is not yours)", ErrNoJob, id)
	}
	return CallerJob{ID: id, StepPID: p.StepPID}, nil
}

// squeueTimeout bounds the agent's question to Slurm.
const squeueTimeout = 15 * time.Second

// runningJobOwner asks Slurm (squeue) for the uid of a job if it is
// running on a node.
var runningJobOwner = slurmJobOwner(slurmcmd.Runner{Timeout: squeueTimeout})

// slurmJobOwner is a jobOwnerFunc that asks Slurm through r: ErrNoJob if
// the job does not run on the node, or if squeue refused to say.
func slurmJobOwner(r slurmcmd.Runner) jobOwnerFunc {
	return func(ctx context.Context, id uint32, node string) (uint32, error) {
		uid, running, err := r.RunningJobOwner(ctx, id, node)
		var exit *slurmcmd.ExitError
		switch {
		case errors.As(err, &exit):
			return 0, fmt.Errorf("%w (squeue: %s)", ErrNoJob, exit.Stderr)
		case err != nil:
			return 0, fmt.Errorf("asking Slurm about job %d: %w", id, err)
		case !running:
			return 0, fmt.Errorf("%w (job %d does not run on this node)", ErrNoJob, id)
		}
		return uid, nil
	}
}

// errJobEnded: the job the sweep ran in ended (or its step did).
var errJobEnded = errors.New("the Slurm job the sweep ran in ended")

// watchStep cancels with errJobEnded when process pid (the caller's
// slurmstepd) exits, or returns at once where it cannot watch it; stop
// ends the watch.
func watchStep(pid int, cancel context.CancelCauseFunc) (stop func()) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			cancel(errJobEnded)
		}
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			select {
			case <-done:
				return
			default:
			}
			// A pidfd is readable once the process has exited; poll in
			// short slices so that stop is noticed.
			if n, _ := unix.Poll(fds, 200); n > 0 {
				cancel(errJobEnded)
				return
			}
		}
	}()
	return func() { close(done) }
}
