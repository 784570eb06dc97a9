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
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// cgroupController is the cgroup controller a cgroupPinner confines with.
type cgroupController int

const (
	// ctlCpuset pins to exactly the sweep point's CPUs.
	ctlCpuset cgroupController = iota
	// ctlCPU grants k CPUs' worth of time (cpu.max); the workload is also
	// pinned by affinity, which the quota backs up should it reset it.
	ctlCPU
)

// cpuMaxPeriod is the cpu.max period: the default CFS period, 100 ms.
const cpuMaxPeriod = 100000

// cgroupPinner confines each sweep point's workload to a cgroup of its own
// created under parent. It never changes a CPU weight: a point's cgroup
// competes for CPU time as its parent's other members do, so a sweep
// inside a job gets no more than the job.
type cgroupPinner struct {
	v2     bool
	ctl    cgroupController
	parent string
	mems   string // v1 cpuset: the parent's memory nodes, which a v1 cpuset needs before it takes tasks
	// home is, in v1, the cpuset cgroup the starting thread returns to
	// (this process's own); parent when empty.
	home string
	// joins are, in v1, the cgroups of other hierarchies that the workload
	// starts in (a job's memory, pids, devices, freezer… cgroups), so the
	// job's limits and accounting cover it.
	joins []cgroupJoin
}

// cgroupJoin is a v1 cgroup a workload starts in, and the cgroup of the
// same hierarchy the starting thread returns to.
type cgroupJoin struct{ dir, home string }

var _ Pinner = (*cgroupPinner)(nil)

func (p *cgroupPinner) Mechanism() string {
	name := "cgroup-v2-cpu.max"
	switch {
	case !p.v2:
		name = "cgroup-v1-cpuset"
	case p.ctl == ctlCpuset:
		name = "cgroup-v2-cpuset"
	}
	if len(p.joins) > 0 {
		name += " in the job's cgroups"
	}
	return name
}

// cgroupSeq makes the names of this process's cgroups unique.
var cgroupSeq atomic.Int64

// create makes a point's cgroup, confined to cpus.
func (p *cgroupPinner) create(cpus []int) (*cgroupConfinement, error) {
	name := fmt.Sprintf("lachesis-profile-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	dir := filepath.Join(p.parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	conf := &cgroupConfinement{dirs: []string{dir}}
	var err error
	switch {
	case !p.v2:
		if err = writeFile(filepath.Join(dir, "cpuset.mems"), p.mems); err == nil {
			err = writeFile(filepath.Join(dir, "cpuset.cpus"), cpuList(cpus))
		}
	case p.ctl == ctlCpuset:
		err = writeFile(filepath.Join(dir, "cpuset.cpus"), cpuList(cpus))
	default:
		err = writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", len(cpus)*cpuMaxPeriod, cpuMaxPeriod))
	}
	if err != nil {
		conf.Release()
		return nil, err
	}
	return conf, nil
}

// Start creates the point's cgroups and starts cmd inside them: in v2 by
// clone3(CLONE_INTO_CGROUP), in v1 by forking from a thread moved into
// them first (v1 cgroups hold threads, and a child starts in its parent
// thread's).
func (p *cgroupPinner) Start(cmd *exec.Cmd, cpus []int) (Confinement, error) {
	conf, err := p.create(cpus)
	if err != nil {
		return nil, err
	}
	if p.v2 {
		err = startIntoCgroupV2(cmd, conf.dirs[0], cpus)
	} else {
		// Every cgroup must take the thread on the way in (a workload
		// outside the job's memory cgroup would escape its limit), and
		// every one must let it go on the way out, or startFromThread
		// retires the thread.
		home := p.home
		if home == "" {
			home = p.parent
		}
		enter := func(tid int) error {
			t := strconv.Itoa(tid)
			if err := writeFile(filepath.Join(conf.dirs[0], "tasks"), t); err != nil {
				return err
			}
			for _, j := range p.joins {
				if err := writeFile(filepath.Join(j.dir, "tasks"), t); err != nil {
					return err
				}
			}
			return nil
		}
		leave := func(tid int) error {
			t := strconv.Itoa(tid)
			errs := []error{writeFile(filepath.Join(home, "tasks"), t)}
			for _, j := range p.joins {
				errs = append(errs, writeFile(filepath.Join(j.home, "tasks"), t))
			}
			return errors.Join(errs...)
		}
		err = startFromThread(cmd, cpus, enter, leave)
	}
	if err != nil {
		conf.Release()
		return nil, err
	}
	return conf, nil
}

// startIntoCgroupV2 starts cmd inside the v2 cgroup dir with
// clone3(CLONE_INTO_CGROUP) (Linux 5.7), and with affinity to cpus too:
// kernels before 6.3 did not apply a cpuset to a child cloned into it.
func startIntoCgroupV2(cmd *exec.Cmd, dir string, cpus []int) error {
	fd, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer fd.Close()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = int(fd.Fd())
	return startFromThread(cmd, cpus, nil, nil)
}

// removeStale removes the cgroups that profilers which died without
// cleaning up left under parent: those named after a pid that no longer
// runs. Their processes, if any survived, are killed.
func removeStale(parent string) {
	if parent == "" {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, "lachesis-profile-*"))
	for _, dir := range dirs {
		pid, _, ok := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "lachesis-profile-"), "-")
		if _, err := strconv.Atoi(pid); !ok || err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join("/proc", pid)); errors.Is(err, os.ErrNotExist) {
			_ = (&cgroupConfinement{dirs: []string{dir}}).Release()
		}
	}
}

// probe checks that a point's cgroups can be made here.
func (p *cgroupPinner) probe(cpus []int) error {
	removeStale(p.parent)
	conf, err := p.create(cpus[:1])
	if err != nil {
		return err
	}
	return conf.Release()
}

// cgroupConfinement is one point's cgroup (cpuset or cpu.max).
type cgroupConfinement struct {
	dirs []string
}

var _ Confinement = (*cgroupConfinement)(nil)

// releaseTimeout bounds how long Release waits for killed processes to
// leave a cgroup.
const releaseTimeout = 5 * time.Second

// Release kills every process left in the cgroups and removes them. The
// profiler's own pid is never killed: in v1 one of its threads may still
// be on its way out.
func (c *cgroupConfinement) Release() error {
	var errs []error
	for _, dir := range c.dirs {
		errs = append(errs, removeCgroup(dir))
	}
	return errors.Join(errs...)
}

func removeCgroup(dir string) error {
	deadline := time.Now().Add(releaseTimeout)
	for {
		killCgroup(dir)
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killCgroup SIGKILLs every process in the cgroup dir but the profiler's
// own. A pid read from cgroup.procs may exit and be reused before the
// signal is sent, so no pid is signalled as a number: v2's cgroup.kill
// kills by membership, and otherwise each process is pinned with a pidfd
// first and signalled through it only if it is still in dir.
func killCgroup(dir string) {
	if writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil {
		return
	}
	self := os.Getpid()
	procs, _ := readTrim(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(procs) {
		if pid, err := strconv.Atoi(f); err == nil && pid != self {
			killIfIn(pid, dir)
		}
	}
}

// killIfIn SIGKILLs pid if, once pinned by a pidfd, it is a member of the
// cgroup dir.
func killIfIn(pid int, dir string) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // gone already
	}
	defer unix.Close(fd)
	// The pidfd holds the process: from here on /proc/<pid> is it or
	// nothing (a reused pid needs the process reaped, and a reaped
	// process makes the pidfd signal fail).
	if !inCgroup(pid, dir) {
		return
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

// inCgroup reports whether /proc/<pid>/cgroup names the cgroup dir in one
// of its hierarchies: by its last component, which is unique (a point's
// cgroup's name holds the profiler's pid and a sequence number), so that
// mount points and cgroup namespaces do not matter.
func inCgroup(pid int, dir string) bool {
	cgs, err := procjob.ReadCgroups(pid)
	if err != nil {
		return false
	}
	for _, c := range cgs {
		if strings.HasSuffix(c.Path, "/"+filepath.Base(dir)) {
			return true
		}
	}
	return false
}

// findCgroupV2 finds where this process may create v2 cgroups with ctl:
// under its own cgroup if that is delegated to it (the controller is
// enabled for its children, or can be), else under the hierarchy's root,
// which root may always use.
func findCgroupV2(ctl cgroupController, cpus []int) (Pinner, error) {
	own, mnt, err := ownCgroup("")
	if err != nil {
		return nil, err
	}
	name := map[cgroupController]string{ctlCpuset: "cpuset", ctlCPU: "cpu"}[ctl]
	parents := []string{own}
	if own != mnt.point {
		parents = append(parents, mnt.point)
	}
	lastErr := fmt.Errorf("%w: the v2 %s controller is not available", errNoCgroup, name)
	for _, parent := range parents {
		avail, _ := readTrim(filepath.Join(parent, "cgroup.controllers"))
		if !slices.Contains(strings.Fields(avail), name) {
			continue
		}
		enabled, _ := readTrim(filepath.Join(parent, "cgroup.subtree_control"))
		if !slices.Contains(strings.Fields(enabled), name) {
			// Fails with EBUSY where parent holds processes (not the root).
			if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+"+name); err != nil {
				lastErr = err
				continue
			}
		}
		if ctl == ctlCpuset && slices.Contains(strings.Fields(avail), "cpu") && !slices.Contains(strings.Fields(enabled), "cpu") {
			// For the points' CPU weight; they work without it.
			_ = writeFile(filepath.Join(parent, "cgroup.subtree_control"), "+cpu")
		}
		p := &cgroupPinner{v2: true, ctl: ctl, parent: parent}
		if err := p.probe(cpus); err != nil {
			lastErr = err
			continue
		}
		return p, nil
	}
	return nil, lastErr
}

// findCgroupV1Cpuset finds this process's v1 cpuset cgroup, under which it
// creates the points' cpusets.
func findCgroupV1Cpuset(cpus []int) (Pinner, error) {
	own, _, err := ownCgroup("cpuset")
	if err != nil {
		return nil, err
	}
	mems, err := readTrim(filepath.Join(own, "cpuset.mems"))
	if err != nil || mems == "" {
		if mems, err = readTrim(filepath.Join(own, "cpuset.effective_mems")); err != nil {
			return nil, fmt.Errorf("%w: %w", errNoCgroup, err)
		}
	}
	p := &cgroupPinner{parent: own, mems: mems}
	if err := p.probe(cpus); err != nil {
		return nil, err
	}
	return p, nil
}
