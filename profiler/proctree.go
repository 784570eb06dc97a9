package profiler

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// treeTotals is what a workload's processes have consumed so far (bytes
// read, CPU time, peak memory, run-queue wait), summed over the process
// and all its descendants.
type treeTotals struct {
	readBytes int64 // rchar: bytes read through read(2) and friends, page-cache hits included
	cpuTicks  int64 // user + system time, in clock ticks
	peakRSS   int64 // sum of the processes' peak resident set sizes (VmHWM), bytes
	// waitNanos is the time its threads spent runnable but waiting for a
	// CPU (schedstat), summed over threads.
	waitNanos int64
}

// treeTotalsOf sums the counters of root and its descendants, found
// through their parent pids in /proc. Processes that exit between two
// calls take their counts with them; callers treat the sums as estimates.
func treeTotalsOf(root int) treeTotals {
	var u treeTotals
	for _, pid := range descendants(root) {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		if b, err := os.ReadFile(filepath.Join(dir, "io")); err == nil {
			u.readBytes += field(b, "rchar:")
		}
		if st, err := procjob.ReadStatus(pid); err == nil {
			u.peakRSS += st.VmHWMKB << 10
		}
		if st, err := procjob.ReadStat(pid); err == nil {
			u.cpuTicks += st.UTime + st.STime
		}
		u.waitNanos += runQueueWait(dir)
	}
	return u
}

// runQueueWait sums the run-queue wait of a process's threads from
// /proc/PID/task/TID/schedstat ("run-time wait-time timeslices", ns); 0
// where the kernel keeps no schedstat.
func runQueueWait(procDir string) int64 {
	tasks, _ := filepath.Glob(filepath.Join(procDir, "task", "*", "schedstat"))
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			sum += v
		}
	}
	return sum
}

// field is the number after key in a /proc "key: value" file.
func field(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// descendants is root and every live process below it.
func descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return []int{root}
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procjob.ReadStat(pid); err == nil {
			children[st.PPID] = append(children[st.PPID], pid)
		}
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// cpuBusyTicks is the time, in clock ticks, that cpus have spent not idle
// (user, nice, system, irq, softirq and steal: steal is time the
// hypervisor gave to someone else, which the workload did not get either).
func cpuBusyTicks(cpus []int) (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	want := map[string]bool{}
	for _, c := range cpus {
		want["cpu"+strconv.Itoa(c)] = true
	}
	var busy int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !want[f[0]] {
			continue
		}
		// user nice system idle iowait irq softirq steal
		for _, k := range []int{1, 2, 3, 6, 7, 8} {
			v, _ := strconv.ParseInt(f[k], 10, 64)
			busy += v
		}
	}
	return busy, nil
}
