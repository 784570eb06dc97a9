package profiler

import (
	"errors"
	"log/slog"
	"os/exec"
)

// Pinner starts a workload confined to a set of CPUs.
type Pinner interface {
	// Mechanism names how, for the log: "cgroup-v2-cpuset",
	// "cgroup-v2-cpu.max", "cgroup-v1-cpuset" or "affinity", the cgroups
	// followed by " (cpu.weight raised)" or " (cpu.shares raised)" where
	// the points' CPU weight is raised too.
	Mechanism() string
	// Start starts cmd confined to cpus from its first instruction on.
	Start(cmd *exec.Cmd, cpus []int) (Confinement, error)
}

// Confinement is one started workload's confinement.
type Confinement interface {
	// Release kills whatever is still inside the confinement and removes
	// what Start created. Call it once the workload has been stopped.
	Release() error
}

// errNoCgroup: no usable cgroup hierarchy of the kind asked for.
var errNoCgroup = errors.New("no usable cgroup")

// detectPinner picks the strongest mechanism this node lets the profiler
// use, probing each by creating (and removing) a cgroup for cpus:
//
//  1. a cgroup v2 with the cpuset controller, under the profiler's own
//     cgroup if it is delegated to it, else under the hierarchy's root;
//  2. a cgroup v1 cpuset;
//  3. a cgroup v2 with only the cpu controller: a quota of k CPUs, plus
//     affinity to k CPUs;
//  4. sched_setaffinity alone, which works everywhere but which the
//     workload can undo by setting its own affinity.
//
// A cgroup also lets the profiler kill every process the workload left
// behind, whatever process group it put them in.
func detectPinner(cpus []int, log *slog.Logger) Pinner {
	probes := []func() (Pinner, error){
		func() (Pinner, error) { return findCgroupV2(ctlCpuset, cpus) },
		func() (Pinner, error) { return findCgroupV1Cpuset(cpus) },
		func() (Pinner, error) { return findCgroupV2(ctlCPU, cpus) },
	}
	for _, probe := range probes {
		p, err := probe()
		if err == nil {
			return p
		}
		log.Debug("profiler: pinning mechanism unavailable", logKeyErr, err)
	}
	return affinityPinner{}
}
