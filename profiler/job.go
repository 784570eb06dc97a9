package profiler

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// Job is the Slurm job a sweep runs in. The workload gets no CPU the job's
// process may not use, starts in that process's cgroups (the job's memory,
// pids, devices and tracking cgroups: its limits hold and Slurm kills it
// with the job), and its points are pinned in child cgroups of the job's
// own cpuset (or, in v2, of the cgroup above the process's). No cgroup is
// made or written outside the job's, and no weight is changed.
type Job struct {
	// ID is the Slurm job id: only cgroups whose path names job_<ID> are
	// the job's.
	ID uint32
	// PID is a process of the job (the one that asked for the sweep).
	PID int
}

// ErrJobCgroup: the job's cgroups cannot hold the sweep.
var ErrJobCgroup = errors.New("profiler: cannot confine the sweep in the job's cgroups")

// mountFor is the mount of the hierarchy c lives in.
func mountFor(c procjob.Cgroup, mounts []cgroupMount) (cgroupMount, bool) {
	for _, m := range mounts {
		if c.V2() && m.v2 {
			return m, true
		}
		if !c.V2() && !m.v2 && len(c.Controllers) > 0 && slices.Contains(m.opts, c.Controllers[0]) {
			return m, true
		}
	}
	return cgroupMount{}, false
}

// dirOf is the directory of cgroup path in mount m.
func dirOf(m cgroupMount, path string) string {
	if m.root != "/" {
		path = strings.TrimPrefix(path, m.root)
	}
	return filepath.Join(m.point, path)
}

// jobPinner finds how to confine a sweep's points inside job: cgroups
// under the job's in v2 or v1 (cpuset), the job's cgroups joined and
// affinity where it has no cpuset, affinity alone where the job has no
// cgroups at all (proctrack/linuxproc). It fails rather than confine less
// than the job does.
func jobPinner(job Job, cpus []int) (Pinner, error) {
	caller, err := procjob.ReadCgroups(job.PID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJobCgroup, err)
	}
	self, err := procjob.ReadCgroups(os.Getpid())
	if err != nil {
		return nil, err
	}
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	home := func(c procjob.Cgroup) (string, bool) {
		for _, s := range self {
			if s.Hierarchy == c.Hierarchy {
				if m, ok := mountFor(s, mounts); ok {
					return dirOf(m, s.Path), true
				}
			}
		}
		return "", false
	}
	var (
		cpuset, cpusetHome string
		joins              []cgroupJoin
	)
	for _, c := range caller {
		if procjob.JobOfCgroupPath(c.Path) != job.ID {
			continue
		}
		m, ok := mountFor(c, mounts)
		if !ok {
			continue // a hierarchy not mounted here: nothing to join
		}
		dir := dirOf(m, c.Path)
		if c.V2() {
			return jobPinnerV2(job, c.Path, dir, cpus)
		}
		h, ok := home(c)
		if !ok {
			return nil, fmt.Errorf("%w: the agent is in no cgroup of the hierarchy of %s", ErrJobCgroup, dir)
		}
		if slices.Contains(c.Controllers, "cpuset") {
			cpuset, cpusetHome = dir, h
		} else if h != dir {
			joins = append(joins, cgroupJoin{dir: dir, home: h})
		}
	}
	switch {
	case cpuset != "":
		mems, err := readTrim(filepath.Join(cpuset, "cpuset.effective_mems"))
		if err != nil || mems == "" {
			if mems, err = readTrim(filepath.Join(cpuset, "cpuset.mems")); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrJobCgroup, err)
			}
		}
		p := &cgroupPinner{parent: cpuset, home: cpusetHome, mems: mems, joins: joins}
		if err := p.probe(cpus); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrJobCgroup, err)
		}
		return p, nil
	case len(joins) > 0:
		return joinPinner{joins: joins}, nil
	}
	return affinityPinner{}, nil
}

// jobPinnerV2 makes the points' cgroups siblings of the caller's cgroup
// (Slurm's v2 layout puts a step's tasks in …/job_N/step_M/user/task_K, and
// a v2 cgroup holding processes may not have children with controllers),
// so never above the job's own.
func jobPinnerV2(job Job, path, dir string, cpus []int) (Pinner, error) {
	parent := filepath.Dir(dir)
	if procjob.JobOfCgroupPath(filepath.Dir(path)) != job.ID {
		return nil, fmt.Errorf("%w: the caller's cgroup %s is the job's top cgroup; run from a job step", ErrJobCgroup, path)
	}
	avail, _ := readTrim(filepath.Join(parent, "cgroup.controllers"))
	enabled, _ := readTrim(filepath.Join(parent, "cgroup.subtree_control"))
	for _, ctl := range []cgroupController{ctlCpuset, ctlCPU} {
		name := map[cgroupController]string{ctlCpuset: "cpuset", ctlCPU: "cpu"}[ctl]
		if !slices.Contains(strings.Fields(avail), name) {
			continue
		}
		if !slices.Contains(strings.Fields(enabled), name) {
			if writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+"+name) != nil {
				continue
			}
		}
		p := &cgroupPinner{v2: true, ctl: ctl, parent: parent}
		if err := p.probe(cpus); err == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: no cpuset or cpu controller usable under %s", ErrJobCgroup, parent)
}

// joinPinner starts the workload in the job's v1 cgroups with affinity to
// the point's CPUs, where the job has no cpuset cgroup to pin in.
type joinPinner struct{ joins []cgroupJoin }

var _ Pinner = joinPinner{}

func (joinPinner) Mechanism() string { return "affinity in the job's cgroups" }

func (p joinPinner) Start(cmd *exec.Cmd, cpus []int) (Confinement, error) {
	enter := func(tid int) error {
		for _, j := range p.joins {
			if err := writeFile(filepath.Join(j.dir, "tasks"), strconv.Itoa(tid)); err != nil {
				return err
			}
		}
		return nil
	}
	leave := func(tid int) error {
		var errs []error
		for _, j := range p.joins {
			errs = append(errs, writeFile(filepath.Join(j.home, "tasks"), strconv.Itoa(tid)))
		}
		return errors.Join(errs...)
	}
	if err := startFromThread(cmd, cpus, enter, leave); err != nil {
		return nil, err
	}
	return noConfinement{}, nil
}
