package procjob

import (
	"errors"
	"fmt"
	"slices"
)

// Process is what the kernel says of one process, read once (Read): the
// facts the rule below judges.
type Process struct {
	PID int
	// UID is the process's real uid.
	UID uint32
	// StepJob is the job named by the title of the process's nearest
	// ancestor (the process included) that is Slurm's slurmstepd running
	// as root, and StepPID that slurmstepd's pid; 0 where there is none.
	StepJob uint32
	StepPID int
	// CgroupJobs are the distinct job ids the process's cgroups name
	// (job_<id>), in the order of /proc/<pid>/cgroup; CgroupErr says why
	// they could not be read.
	CgroupJobs []uint32
	CgroupErr  error
	// CgroupJob is the job of its job_<id> cgroup that root owns
	// (Slurm's: rootJobOfCgroups), 0 where it is in none; CgroupsSplit:
	// root-owned job cgroups of two jobs (only root could do that).
	CgroupJob    uint32
	CgroupsSplit bool
}

// ErrGone: the process does not exist, has exited (a zombie), or ended
// while it was read.
var ErrGone = errors.New("the process is gone")

// Read reads pid's facts from /proc: its status once (its uid, and the
// first step of its ancestry), its ancestors' up to a slurmstepd, its
// cgroups. A zombie is gone: it holds no memory and no GPU, and its
// facts are those of a job that ended (its slurmstepd may have exited
// and its job cgroup been removed, which would make it look like a
// process that left its job).
func Read(pid int) (Process, error) {
	st, err := ReadStatus(pid)
	if err != nil {
		return Process{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	if st.Exited {
		return Process{}, fmt.Errorf("%w: it has exited and waits to be reaped", ErrGone)
	}
	// The start time before and after: a pid reused meanwhile (the
	// process ended and another took its number) is read as gone, never
	// as the newcomer.
	before, err := ReadStat(pid)
	if err != nil {
		return Process{}, fmt.Errorf("%w: %w", ErrGone, err)
	}
	p := Process{PID: pid, UID: st.UID}
	p.StepJob, p.StepPID = stepdOf(pid, st)
	cgs, err := ReadCgroups(pid)
	p.CgroupJobs, p.CgroupErr = JobsOfCgroups(cgs), err
	if len(p.CgroupJobs) > 0 {
		var whole bool
		p.CgroupJob, whole = rootJobOfCgroups(cgs, readMounts(), statOwner)
		p.CgroupsSplit = !whole
	}
	if after, err := ReadStat(pid); err != nil || after.StartTime != before.StartTime {
		return Process{}, fmt.Errorf("%w: its pid was reused while it was read", ErrGone)
	}
	return p, nil
}

// The rule. Where the process is in a job_<id> cgroup that root owns,
// that is its job: Slurm makes a job's cgroup as root (proctrack/cgroup,
// task/cgroup), a user can neither make one (a job_<id> cgroup they make
// where cgroup v2 is delegated to them is their own, and not believed)
// nor move a process out of theirs, so a GPU process that left its step's
// process tree (setsid, daemonised, a chain deeper than the walk) is
// still in its job. Only where it is in no such cgroup (a node without
// job cgroups: proctrack/linuxproc or pgid) does the ancestry decide: its
// nearest ancestor that is Slurm's own slurmstepd running as root names
// J (the kernel's view, which the process cannot forge), and job_<id>
// cgroups it has, if any, must agree. There a process that left its
// step's tree is in no job; the agent reports its use as no job's, with
// its uid, and the controller charges it to that user's guests on the
// GPU (node-agent/agent/gpuuse.go, internal/controller/gpushare).
//
// A GPU process's use (GPUJob) follows that rule; cgroups it cannot
// read mean the process ended, and so does a zombie (Read): a job's
// process killed with its job is one until reaped, after its slurmstepd
// exited and its job cgroup was removed, and judged by the rule it would
// be no job's, its stale use charged to its user's next guest. A request on the agent's socket
// (RequestJob) still needs the step, as it always has: a request comes
// from a process the user starts in their job, and the step is what
// profiling runs under; it takes J among the cgroups' jobs and ignores
// cgroups it cannot read.

// Why a process is in no job: the reason label of the agent's
// lachesis_agent_gpu_processes_outside_jobs.
const (
	// NoJob: in no job cgroup of root's, and no root slurmstepd among its
	// ancestors (or its job_<id> cgroups name another job).
	NoJob = "no_job"
	// Gone: the process ended between the device's list and the look-up.
	Gone = "gone"
)

// ErrNoStep: no root slurmstepd among the process's ancestors.
var ErrNoStep = errors.New("no Slurm step among the process's ancestors")

// CgroupsDisagree: the process's step names one job and its cgroups
// others.
type CgroupsDisagree struct {
	Step    uint32
	Cgroups []uint32
}

func (e *CgroupsDisagree) Error() string {
	return fmt.Sprintf("its step says job %d, its cgroups %v", e.Step, e.Cgroups)
}

// RequestJob is the job a request from the process (a profile or progress
// request on the agent's socket) comes from: ErrNoStep, or a
// *CgroupsDisagree, when it is in none.
func (p Process) RequestJob() (uint32, error) {
	switch {
	case p.StepJob == 0:
		return 0, ErrNoStep
	case len(p.CgroupJobs) > 0 && !slices.Contains(p.CgroupJobs, p.StepJob):
		return 0, &CgroupsDisagree{Step: p.StepJob, Cgroups: p.CgroupJobs}
	}
	return p.StepJob, nil
}

// GPUJob is the job a GPU process's use is charged to, with why ("",
// NoJob or Gone).
func (p Process) GPUJob() (uint32, string) {
	switch {
	case p.CgroupErr != nil:
		return 0, Gone
	case p.CgroupsSplit:
		return 0, NoJob
	case p.CgroupJob != 0:
		return p.CgroupJob, ""
	case p.StepJob == 0:
		return 0, NoJob
	case len(p.CgroupJobs) > 1 || (len(p.CgroupJobs) == 1 && p.CgroupJobs[0] != p.StepJob):
		return 0, NoJob
	}
	return p.StepJob, ""
}

// GPUProcessJob reads process pid and returns the job its GPU use is
// charged to, its real uid (0 when it is gone) and why it is in no job
// ("", NoJob or Gone): the node agent's look-up for every GPU process.
func GPUProcessJob(pid int) (job, uid uint32, why string) {
	p, err := Read(pid)
	if err != nil {
		return 0, 0, Gone
	}
	job, why = p.GPUJob()
	return job, p.UID, why
}
