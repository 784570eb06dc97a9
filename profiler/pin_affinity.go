package profiler

import "os/exec"

// affinityPinner confines a workload with sched_setaffinity, inherited from
// the thread that starts it.
type affinityPinner struct{}

var _ Pinner = affinityPinner{}

func (affinityPinner) Mechanism() string { return "affinity" }

func (affinityPinner) Start(cmd *exec.Cmd, cpus []int) (Confinement, error) {
	if err := startFromThread(cmd, cpus, nil, nil); err != nil {
		return nil, err
	}
	return noConfinement{}, nil
}

// noConfinement has nothing to release: the workload's process group is
// killed by the sweep itself.
type noConfinement struct{}

var _ Confinement = noConfinement{}

func (noConfinement) Release() error { return nil }
