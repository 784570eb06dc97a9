package profiler

import (
	"fmt"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// gib is the memory axis's unit: "GB" in Records and sensitivity profiles
// means GiB, 2^30 bytes, the unit Slurm's memory sizes are counted in.
const gib = 1 << 30

// The memory axis's grid: a workload never gets less than memFloorGiB per
// GPU (the measured footprint of a small workload's main process misses
// its shared libraries, CUDA context and children's peaks), and grid
// values are rounded up to memStepGiB so the axis reads cleanly and errs
// toward more memory.
const (
	memFloorGiB = 1.0
	memStepGiB  = 0.25
)

// cacheFractions are the fractions of the dataset cached at the memory
// axis's grid points, besides the proportional share.
var cacheFractions = []float64{0, 0.25, 0.5, 0.75, 1}

// memoryModel is Synergy's model of throughput against page-cache size. An
// epoch reads the dataset D once. With everything in memory it takes
// T_cpu = D / (throughput × bytesPerUnit); with C bytes cached, reading
// takes C/memBW + (D − C)/diskBW, and the epoch takes the longer of the
// two, the CPU and the I/O overlapping:
//
//	epoch(C) = max(T_cpu, C/memBW + (D − C)/diskBW)
type memoryModel struct {
	datasetBytes  float64
	diskBW, memBW float64 // bytes per second
	// bytesPerUnit is how many dataset bytes one unit of throughput (a
	// sample, an iteration) reads, measured during the sweep. Zero means
	// unknown, and the model then predicts no memory sensitivity.
	bytesPerUnit float64
}

// sensitive reports whether the model has what it needs to predict
// anything other than "memory does not matter".
func (m memoryModel) sensitive() bool {
	return m.datasetBytes > 0 && m.bytesPerUnit > 0 && m.diskBW > 0 && m.memBW > 0
}

// throughput at cacheBytes of page cache, for a workload whose throughput
// with the dataset in memory is tput.
func (m memoryModel) throughput(tput, cacheBytes float64) float64 {
	if !m.sensitive() || tput <= 0 {
		return tput
	}
	d := m.datasetBytes
	c := min(max(cacheBytes, 0), d)
	cpu := d / (tput * m.bytesPerUnit)
	io := c/m.memBW + (d-c)/m.diskBW
	return tput * cpu / max(cpu, io)
}

// share is a GPU's proportional share of the profiling node: its CPUs
// divided by its GPUs (at least one CPU), and likewise its memory.
type share struct {
	cpusPerGPU   int
	memGiBPerGPU float64
}

func nodeShare(nodeCPUs, nodeGPUs int, nodeMemBytes int64) share {
	return share{
		cpusPerGPU:   max(nodeCPUs/nodeGPUs, 1),
		memGiBPerGPU: float64(nodeMemBytes) / gib / float64(nodeGPUs),
	}
}

// memoryGrid is the memory axis in GiB per GPU: the workload's own memory
// (footprint, bytes, for all its GPUs) plus 0, ¼, ½, ¾ and all of the
// dataset, split over its GPUs, and the proportional share.
func memoryGrid(gpus int, footprint, dataset int64, sh share) []float64 {
	grid := []float64{sh.memGiBPerGPU}
	for _, f := range cacheFractions {
		m := (float64(footprint) + f*float64(dataset)) / float64(gpus) / gib
		grid = append(grid, math.Ceil(max(m, memFloorGiB)/memStepGiB)*memStepGiB)
	}
	slices.Sort(grid)
	return slices.CompactFunc(grid, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 })
}

// buildMatrix is the sensitivity matrix of a swept workload: throughput at
// every swept CPU count (per GPU) and every memory grid value (per GPU),
// the memory axis modelled, normalised to the throughput at the node's
// proportional share.
func buildMatrix(model string, sweep []profile.Measurement, gpus int, footprint int64, mm memoryModel, sh share) (sensitivity.Profile, error) {
	p := sensitivity.Profile{Model: model, MemGB: memoryGrid(gpus, footprint, int64(mm.datasetBytes), sh)}
	cache := func(memGiBPerGPU float64) float64 {
		return memGiBPerGPU*float64(gpus)*gib - float64(footprint)
	}
	at := func(tput, memGiB float64) float64 { return mm.throughput(tput, cache(memGiB)) }

	ref := at(cpuBoundAt(sweep, sh.cpusPerGPU*gpus), sh.memGiBPerGPU)
	if !(ref > 0) || !finite(ref) {
		return p, fmt.Errorf("%w: zero throughput at the proportional share", ErrNoThroughput)
	}
	for _, m := range sweep {
		p.CPUs = append(p.CPUs, m.CPUs/gpus)
		row := make([]float64, len(p.MemGB))
		for j, mem := range p.MemGB {
			row[j] = at(m.Throughput, mem) / ref
		}
		p.Throughput = append(p.Throughput, row)
	}
	return p, nil
}

// cpuBoundAt is the measured throughput at cpus, or if cpus was not
// measured at the largest count below it (or the smallest measured), which
// never overstates it for throughput that rises with CPUs.
func cpuBoundAt(sweep []profile.Measurement, cpus int) float64 {
	v := sweep[0].Throughput
	for _, m := range sweep {
		if m.CPUs <= cpus {
			v = m.Throughput
		}
	}
	return v
}
