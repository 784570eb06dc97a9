package profiler

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// treeUsage is what a workload's processes have used so far, summed over
// the process and all its descendants.
type treeUsage struct {
	readBytes int64 // rchar: bytes read through read(2) and friends, page-cache hits included
	cpuTicks  int64 // user + system time, in clock ticks
	peakRSS   int64 // sum of the processes' peak resident set sizes (VmHWM), bytes
	// waitNanos is the time its threads spent runnable but waiting for a
	// CPU (schedstat), summed over threads.
	waitNanos int64
}

// usageOf sums the usage of root and its descendants, found through their
// parent pids in /proc. Processes that exit between two calls take their
// counts with them; callers treat the sums as estimates.
func usageOf(root int) treeUsage {
	var u treeUsage
	for _, pid := range descendants(root) {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		if b, err := os.ReadFile(filepath.Join(dir, "io")); err == nil {
			u.readBytes += field(b, "rchar:")
		}
		if b, err := os.ReadFile(filepath.Join(dir, "status")); err == nil {
			u.peakRSS += field(b, "VmHWM:") << 10 // kB
		}
		if st, err := readStat(pid); err == nil {
			u.cpuTicks += st.utime + st.stime
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

// procStat is the part of /proc/PID/stat the profiler uses.
type procStat struct {
	ppid         int
	utime, stime int64
}

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or
	// parentheses itself: the fields proper start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("short /proc/%d/stat", pid)
	}
	var st procStat
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseInt(f[11], 10, 64)
	st.stime, _ = strconv.ParseInt(f[12], 10, 64)
	return st, nil
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
		if st, err := readStat(pid); err == nil {
			children[st.ppid] = append(children[st.ppid], pid)
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
