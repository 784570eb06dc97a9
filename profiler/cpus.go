package profiler

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// allowedCPUs are the CPUs this process may run on (allowedCPUsOf(0)).
func allowedCPUs() ([]int, error) { return allowedCPUsOf(0) }

// allowedCPUsOf are the CPUs process pid (0: this one) may run on, ordered so that the
// first k of them are the best k to pin a k-core sweep point to: one
// hardware thread of every physical core before any core's second thread
// (a sibling thread is not a core's worth of throughput), package by
// package.
func allowedCPUsOf(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return orderByCore(cpus, readTopology), nil
}

// topology is where a CPU sits: its package and core.
type topology struct{ pkg, core int }

// readTopology reads a CPU's place from sysfs; ok is false where sysfs does
// not say (containers, exotic kernels), and the CPU is then its own core.
func readTopology(cpu int) (topology, bool) {
	dir := fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology", cpu)
	pkg, err1 := readInt(filepath.Join(dir, "physical_package_id"))
	core, err2 := readInt(filepath.Join(dir, "core_id"))
	if err1 != nil || err2 != nil {
		return topology{}, false
	}
	return topology{pkg, core}, true
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// orderByCore sorts cpus by (which thread of its core it is, package,
// core, number).
func orderByCore(cpus []int, topo func(int) (topology, bool)) []int {
	type place struct {
		cpu, sibling int
		topology
	}
	seen := map[topology]int{}
	places := make([]place, 0, len(cpus))
	for _, c := range slices.Sorted(slices.Values(cpus)) {
		t, ok := topo(c)
		if !ok {
			t = topology{pkg: -1, core: c}
		}
		places = append(places, place{cpu: c, sibling: seen[t], topology: t})
		seen[t]++
	}
	slices.SortStableFunc(places, func(a, b place) int {
		if a.sibling != b.sibling {
			return a.sibling - b.sibling
		}
		if a.pkg != b.pkg {
			return a.pkg - b.pkg
		}
		if a.core != b.core {
			return a.core - b.core
		}
		return a.cpu - b.cpu
	})
	out := make([]int, len(places))
	for i, p := range places {
		out[i] = p.cpu
	}
	return out
}

// cpuList formats cpus the way cgroup files take them: "0,2,5".
func cpuList(cpus []int) string {
	parts := make([]string, len(cpus))
	for i, c := range slices.Sorted(slices.Values(cpus)) {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ",")
}

// candidateCounts are the CPU counts a sweep may measure for a workload of
// gpus GPUs with at most maxCPUs: whole CPUs per GPU, 1 to maxCPUs/gpus.
func candidateCounts(maxCPUs, gpus int) []int {
	var out []int
	for c := gpus; c <= maxCPUs; c += gpus {
		out = append(out, c)
	}
	return out
}
