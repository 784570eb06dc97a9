package profiler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lachesis-sched/lachesis/profile"
)

const (
	// warmupFraction of every point is start-up and is not measured.
	warmupFraction = 0.3
	// stopGrace is how long a workload gets to exit after SIGTERM before
	// SIGKILL.
	stopGrace = 2 * time.Second
	// userHZ is the unit of /proc's tick counts, fixed at 100 on Linux.
	userHZ = 100
)

// pointResult is one sweep point and what else was seen while it ran.
type pointResult struct {
	profile.Measurement
	// readRate is the bytes per second the workload read while measured
	// (rchar: page-cache hits included), the memory model's link between
	// throughput and dataset bytes.
	readRate float64
	// peakRSS is the workload's own memory, without the page cache.
	peakRSS int64
	// contention is the fraction of the point's CPUs' time that other
	// processes used while it was measured.
	contention float64
	// waiting is how many of the workload's threads were, on average,
	// runnable but waiting for a CPU while it was measured.
	waiting float64
}

// disturbed reports whether other processes may have held the workload
// back: they used a fair part of its CPUs while its threads queued for
// one. Either alone is no evidence: neighbours may use a CPU the workload
// did not want, and a workload with more threads than CPUs queues behind
// itself.
func (r pointResult) disturbed() bool {
	return r.contention > contentionLimit && r.waiting > waitingLimit
}

// pointRunner runs the workload at one CPU count.
type pointRunner struct {
	spec   normalised
	cpus   []int // ordered by allowedCPUs: a k-core point uses the first k
	pinner Pinner
	signal Signal
	log    *slog.Logger
	// inJob: the pinner confines in a job's cgroups, and a failure to
	// start there must not fall back to affinity, which would start the
	// workload outside them.
	inJob bool
}

// started is a running workload.
type started struct {
	cmd  *exec.Cmd
	out  *os.File
	conf Confinement
}

// start starts the workload on the first k CPUs. If a cgroup mechanism
// fails here although its probe worked (clone3 refused, say), the runner
// falls back to affinity for good and says so.
func (r *pointRunner) start(k int) (started, error) {
	for {
		cmd := exec.Command(r.spec.Argv[0], r.spec.Argv[1:]...)
		env := r.spec.Env
		if env == nil {
			env = os.Environ()
		}
		cmd.Env = append(slices.Clip(env), "LACHESIS_PROFILE_CPUS="+strconv.Itoa(k))
		cmd.Dir = r.spec.Dir
		// Its own process group, so stopping it stops what it forked.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: r.spec.Credential}
		pr, pw, err := os.Pipe()
		if err != nil {
			return started{}, err
		}
		cmd.Stdout, cmd.Stderr = pw, pw
		conf, err := r.pinner.Start(cmd, r.cpus[:k])
		pw.Close()
		if err == nil {
			return started{cmd, pr, conf}, nil
		}
		pr.Close()
		// A command that is not found fails the same way whatever pins it;
		// any other failure under a cgroup may be the cgroup's (clone3
		// refused), so it is retried once with affinity, and a failure there
		// is the workload's.
		var execErr *exec.Error
		_, isAffinity := r.pinner.(affinityPinner)
		if errors.As(err, &execErr) || isAffinity || r.inJob {
			return started{}, fmt.Errorf("%w: start %q: %w", ErrWorkloadFailed, r.spec.Argv[0], err)
		}
		r.log.Warn("profiler: pinning failed, falling back to affinity",
			logKeyMechanism, r.pinner.Mechanism(), logKeyErr, err)
		r.pinner = affinityPinner{}
	}
}

// run measures one point: it starts the workload on k CPUs, discards the
// warm-up, measures until PointDuration, and stops it.
func (r *pointRunner) run(ctx context.Context, k int) (pointResult, error) {
	w, err := r.start(k)
	if err != nil {
		return pointResult{}, err
	}
	pid := w.cmd.Process.Pid
	begin := time.Now()
	dur := r.spec.PointDuration
	warmEnd := begin.Add(time.Duration(float64(dur) * warmupFraction))
	pctx, cancel := context.WithDeadline(ctx, begin.Add(dur))
	defer cancel()

	watch := r.signal.Watch(pctx)
	tail := &outputTail{}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		readLines(w.out, func(line string) {
			watch.Line(time.Now(), line)
			tail.add(line)
		})
	}()
	// The workload's exit is watched without reaping it: while its leader
	// is an unreaped zombie, its pid (and process group id) cannot be
	// reused, so signalling the group never hits another process. It is
	// reaped (cmd.Wait) only after the last signal to the group.
	exited := make(chan struct{})
	go func() { waitExited(pid); close(exited) }()

	var res pointResult
	done := false
	waitUntil := func(t time.Time) {
		timer := time.NewTimer(time.Until(t))
		defer timer.Stop()
		select {
		case <-exited:
			done = true
		case <-timer.C:
		case <-pctx.Done():
		}
	}

	// The tree's totals are sampled at the end of warm-up and at the end
	// of the point, so rates and contention cover the measured part only.
	waitUntil(warmEnd)
	if !done && pctx.Err() == nil {
		t0 := time.Now()
		u0 := treeTotalsOf(pid)
		busy0, _ := cpuBusyTicks(r.cpus[:k])
		waitUntil(begin.Add(dur))
		if !done && ctx.Err() == nil {
			u1 := treeTotalsOf(pid)
			busy1, _ := cpuBusyTicks(r.cpus[:k])
			secs := time.Since(t0).Seconds()
			res.readRate = max(float64(u1.readBytes-u0.readBytes), 0) / secs
			res.peakRSS = u1.peakRSS
			res.contention = contention(k, secs, busy1-busy0, u1.cpuTicks-u0.cpuTicks)
			res.waiting = float64(u1.waitNanos-u0.waitNanos) / 1e9 / secs
		}
	}
	if !done {
		stop(pid, exited)
	}
	// Whatever else is left in the group, while the leader still holds
	// its id; then the leader is reaped.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	waitErr := w.cmd.Wait()
	cancel()
	if err := w.conf.Release(); err != nil {
		r.log.Warn("profiler: cgroup left behind", logKeyErr, err)
	}
	// Something the workload forked may still hold the pipe open; don't
	// wait for it forever.
	select {
	case <-readDone:
	case <-time.After(time.Second):
		w.out.Close()
		<-readDone
	}
	w.out.Close()
	if err := ctx.Err(); err != nil {
		return res, err
	}

	res.Measurement = profile.Measurement{CPUs: k, Seconds: time.Since(begin).Seconds()}
	v, n, err := watch.Result(warmEnd)
	if err != nil {
		if done && waitErr != nil {
			return res, fmt.Errorf("%w at %s: %w; %s", ErrWorkloadFailed, profile.NCPUs(k), waitErr, tail)
		}
		return res, fmt.Errorf("%w at %s; %s", err, profile.NCPUs(k), tail)
	}
	if done && waitErr != nil {
		r.log.Warn("profiler: workload failed after reporting throughput", logKeyCPUs, k, logKeyErr, waitErr)
	}
	res.Throughput, res.Samples = v, n
	return res, nil
}

// stop ends the workload's process group: SIGTERM, then SIGKILL after
// stopGrace. The leader is not reaped until the caller calls cmd.Wait.
func stop(pid int, exited <-chan struct{}) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
}

// waitExited returns when process pid (a child of this process) has
// exited, leaving it unreaped (waitid with WNOWAIT).
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// contention is the fraction of k CPUs' time over secs that other
// processes used: busy is the CPUs' busy ticks, own the workload's.
func contention(k int, secs float64, busy, own int64) float64 {
	capacity := float64(k) * secs * userHZ
	if capacity <= 0 {
		return 0
	}
	return min(max(float64(busy-own), 0)/capacity, 1)
}
