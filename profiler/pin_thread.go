package profiler

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startFromThread starts cmd from an OS thread of its own whose CPU
// affinity is cpus and which enter (given) has put wherever else the child
// must start (a cgroup v1 takes single threads). A forked child inherits its
// parent thread's affinity and v1 cgroups, so the workload is confined
// before it runs its first instruction, with no window in which it (or a
// child it forks at once) runs unconfined, as there would be if the
// workload were confined after it started.
//
// The thread is restored afterwards (affinity, and leave undoes enter);
// should restoring fail, the thread stays locked and the Go runtime
// retires it when the goroutine ends, so no other goroutine ever runs
// confined.
func startFromThread(cmd *exec.Cmd, cpus []int, enter, leave func(tid int) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var old unix.CPUSet
		if err := unix.SchedGetaffinity(0, &old); err != nil {
			errc <- fmt.Errorf("sched_getaffinity: %w", err)
			return
		}
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- fmt.Errorf("sched_setaffinity %v: %w", cpus, err)
			return
		}
		tid := unix.Gettid()
		if enter != nil {
			if err := enter(tid); err != nil {
				errc <- err
				return
			}
		}
		err := cmd.Start()
		// Restore before reporting, so that when the caller goes on (and
		// removes the cgroup), this thread is out of it.
		restored := (leave == nil || leave(tid) == nil) && unix.SchedSetaffinity(0, &old) == nil
		errc <- err
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	return <-errc
}
