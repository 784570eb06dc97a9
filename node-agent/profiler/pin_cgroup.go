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

// The CPU weight of a point's cgroup, 16 times the default (v2
// cpu.weight, v1 cpu.shares), where the profiler can set it: other
// processes on the node (and, with autogroup, other login sessions, which
// nice cannot outrank) then disturb the measurement little, a neighbour
// at default weight getting a seventeenth of a shared CPU. Not the
// maximum (100 and 256 times): at that weight a workload that saturates
// every CPU of the node starves the profiler itself, which has to read its
// output and /proc meanwhile. The workload is confined to the point's
// CPUs, so nothing outside them is affected.
const (
	boostWeight = "1600"
	boostShares = "16384"
)

// cgroupPinner confines each sweep point's workload to a cgroup of its own
// created under parent.
type cgroupPinner struct {
	v2     bool
	ctl    cgroupController
	parent string
	mems   string // v1 cpuset: the parent's memory nodes, which a v1 cpuset needs before it takes tasks
	// cpuParent is, in v1, this process's cgroup in a separately mounted
	// cpu hierarchy, where every point also gets a cgroup, for its CPU
	// weight; "" where there is none to use.
	cpuParent string
	// boost names the weight file the points' cgroups raise, "" if none.
	boost string
}

var _ Pinner = (*cgroupPinner)(nil)

func (p *cgroupPinner) Mechanism() string {
	name := "cgroup-v2-cpu.max"
	switch {
	case !p.v2:
		name = "cgroup-v1-cpuset"
	case p.ctl == ctlCpuset:
		name = "cgroup-v2-cpuset"
	}
	if p.boost != "" {
		name += " (" + p.boost + " raised)"
	}
	return name
}

// cgroupSeq makes the names of this process's cgroups unique.
var cgroupSeq atomic.Int64

// create makes a point's cgroups, confined to cpus, with their CPU weight
// raised where it can be.
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
	conf.boost = raiseWeight(dir)
	if p.cpuParent != "" {
		cdir := filepath.Join(p.cpuParent, name)
		if os.Mkdir(cdir, 0o755) == nil {
			conf.dirs = append(conf.dirs, cdir)
			if b := raiseWeight(cdir); b != "" {
				conf.boost = b
			}
		}
	}
	return conf, nil
}

// raiseWeight raises the CPU weight of the cgroup dir and names the file
// it wrote ("" if none): best effort, a point measures without it too.
func raiseWeight(dir string) string {
	for _, w := range []struct{ file, val string }{{"cpu.weight", boostWeight}, {"cpu.shares", boostShares}} {
		if writeFile(filepath.Join(dir, w.file), w.val) == nil {
			return w.file
		}
	}
	return ""
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
		// Entering, only the cpuset must take the thread (the cpu cgroup is
		// for the weight, and a point measures without it); leaving, the
		// thread must get out of both, or startFromThread retires it.
		parents := []string{p.parent, p.cpuParent}
		move := func(into func(i int) string, required int) func(int) error {
			return func(tid int) error {
				for i := range conf.dirs {
					if err := writeFile(filepath.Join(into(i), "tasks"), strconv.Itoa(tid)); err != nil && i < required {
						return err
					}
				}
				return nil
			}
		}
		err = startFromThread(cmd, cpus,
			move(func(i int) string { return conf.dirs[i] }, 1),
			move(func(i int) string { return parents[i] }, len(conf.dirs)))
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

// probe checks that a point's cgroups can be made here, and finds out
// whether their weight can be raised.
func (p *cgroupPinner) probe(cpus []int) error {
	removeStale(p.parent)
	removeStale(p.cpuParent)
	conf, err := p.create(cpus[:1])
	if err != nil {
		return err
	}
	p.boost = conf.boost
	return conf.Release()
}

// cgroupConfinement is one point's cgroups: its cpuset (or cpu.max)
// cgroup first, and in v1 its cgroup in the cpu hierarchy.
type cgroupConfinement struct {
	dirs  []string
	boost string // the weight file raised, "" if none
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
	self := os.Getpid()
	deadline := time.Now().Add(releaseTimeout)
	for {
		procs, _ := readTrim(filepath.Join(dir, "cgroup.procs"))
		for _, f := range strings.Fields(procs) {
			if pid, err := strconv.Atoi(f); err == nil && pid != self {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
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
	// A separately mounted cpu hierarchy gives the points a CPU weight;
	// without one (or co-mounted with cpuset), the cpuset cgroup itself
	// may take it.
	if cpuDir, _, err := ownCgroup("cpu"); err == nil && cpuDir != own {
		p.cpuParent = cpuDir
	}
	if err := p.probe(cpus); err != nil {
		return nil, err
	}
	return p, nil
}
