package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/profiler"
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

// maxAncestors bounds the walk from the caller up to its slurmstepd.
const maxAncestors = 64

// SlurmCallerJob finds the caller's job from the kernel's view of its
// process, which the caller cannot forge: its nearest ancestor that is a
// slurmstepd running as root (Slurm's step daemon, whose title is
// "slurmstepd: [<job>.<step>]"), cross-checked with the job_<id> its
// cgroups name where Slurm made any; then asks Slurm (squeue) that the job
// runs on node and belongs to the caller's uid. The cgroups alone are not
// enough: where cgroup v2 is delegated to users (systemd user slices), a
// user can make a cgroup named job_<id> of their own and move into it.
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
	job := CallerJob{}
	job.ID, job.StepPID = stepdOf(pid)
	cg, _ := profiler.JobsOfProcess(pid)
	switch {
	case job.ID == 0:
		return CallerJob{}, ErrNoJob
	case len(cg) > 0 && !slices.Contains(cg, job.ID):
		return CallerJob{}, fmt.Errorf("%w (its step says job %d, its cgroups %v)", ErrNoJob, job.ID, cg)
	}
	uid, err := owner(ctx, job.ID, node)
	if err != nil {
		return CallerJob{}, err
	}
	if uid != caller.UID {
		return CallerJob{}, fmt.Errorf("%w (job %d is not yours)", ErrNoJob, job.ID)
	}
	return job, nil
}

// stepdOf walks from pid up its ancestors to the nearest slurmstepd that
// runs as root and returns its job id and pid (0, 0 if none). The binary
// is checked by /proc/<pid>/exe, not by the name or title a process gives
// itself: a user may name anything "slurmstepd", even a setuid program,
// but cannot make root run Slurm's own slurmstepd for them.
func stepdOf(pid int) (job uint32, stepPID int) {
	for range maxAncestors {
		if pid <= 1 {
			return 0, 0
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, 0
		}
		uids, ppid := statusLine(st, "Uid:"), statusLine(st, "PPid:")
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		// Debian installs it as slurmstepd-wlm.
		if strings.HasPrefix(filepath.Base(exe), "slurmstepd") && allZero(uids) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if id := stepdJobID(string(cmdline)); id != 0 {
				return id, pid
			}
		}
		next, err := strconv.Atoi(ppid)
		if err != nil {
			return 0, 0
		}
		pid = next
	}
	return 0, 0
}

// statusLine is the value of key in /proc/<pid>/status.
func statusLine(status []byte, key string) string {
	for _, line := range bytes.Split(status, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			return strings.TrimSpace(string(v))
		}
	}
	return ""
}

// allZero: every uid of a status Uid: line (real, effective, saved, fs)
// is 0.
func allZero(uids string) bool {
	f := strings.Fields(uids)
	return len(f) == 4 && !slices.ContainsFunc(f, func(s string) bool { return s != "0" })
}

// stepdJobID reads the job id from a slurmstepd's title, "slurmstepd:
// [1234.0]", "[1234.batch]" or "[1234.extern]" (cmdline may end in NULs
// and padding); 0 if it is not one.
func stepdJobID(cmdline string) uint32 {
	rest, ok := strings.CutPrefix(cmdline, "slurmstepd: [")
	if !ok {
		return 0
	}
	end := strings.IndexAny(rest, ".]")
	if end <= 0 {
		return 0
	}
	id, err := strconv.ParseUint(rest[:end], 10, 32)
	if err != nil {
		return 0
	}
	return uint32(id)
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
