package ctldbench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// MixedWorkload is the sbatch arguments of the i-th submission of a
// realistic mix: six in ten ask for GPUs (most of them reach the sizing
// core: with and without a model key, per-job and per-node GPU requests,
// one with explicit CPUs and memory), four in ten are CPU-only jobs, which
// the plugin answers without entering Go.
func MixedWorkload(i int) []string {
	mix := [][]string{
		{"-J", "resnet50", "--gpus=1", "--comment=model=resnet50"},
		{"-J", "etl", "--cpus-per-task=4", "--mem=2G"},
		{"-J", "bert-large", "--gpus=2", "--comment=model=bert-large"},
		{"-J", "prep", "-n", "1"},
		{"-J", "gnmt", "--gpus=4", "--comment=model=gnmt"},
		{"-J", "sweep-lr", "-N", "1", "--gpus-per-node=1", "--comment=model=resnet18"},
		{"-J", "mpi", "-n", "4"},
		{"-J", "explicit", "--gpus=1", "--cpus-per-gpu=2", "--mem-per-gpu=4G", "--comment=model=resnet50"},
		{"-J", "post", "-c", "2", "--mem-per-cpu=1G"},
		{"-J", "lm-finetune", "--gpus=1"},
	}
	return append(append([]string(nil), mix[i%len(mix)]...), "--output=/dev/null", "--wrap", "sleep 60")
}

// The bench node's shape, and the proportional share job_submit/synergy
// gives a GPU job without a profile on it (CPUs and memory per GPU).
const (
	benchGPUs, benchCPUs, benchMemMB = 4, 8, 16000
	shareCPUsPerGPU                  = benchCPUs / benchGPUs
	shareMemMBPerGPU                 = benchMemMB / benchGPUs
)

// SizedWorkload is MixedWorkload with every GPU job asking for what
// job_submit/synergy would give it on the bench node (the proportional
// share: none of the mix's models has a profile there), as a plain Slurm
// user could ask: submitted to a cluster without the plugin, it separates
// the plugin's own cost from that of Slurm handling a bigger request.
func SizedWorkload(i int) []string {
	args := MixedWorkload(i)
	gpus, explicit := false, false
	for _, a := range args {
		gpus = gpus || strings.HasPrefix(a, "--gpus")
		explicit = explicit || strings.HasPrefix(a, "--cpus-per-gpu")
	}
	if !gpus || explicit { // CPU jobs, and the one that already asks
		return args
	}
	extra := []string{fmt.Sprintf("--cpus-per-gpu=%d", shareCPUsPerGPU), fmt.Sprintf("--mem-per-gpu=%d", shareMemMBPerGPU)}
	return append(extra, args...)
}

// ThroughputOptions configure SubmitThroughput.
type ThroughputOptions struct {
	Root, Dir string
	PortBase  int    // the plain cluster's; the plugin's is PortBase+10
	PluginDir string // default the build tree's (slurmcluster.BuildTree)
	Rounds    int    // interleaved batch pairs measured
	Batch     int    // submissions per batch
	Workers   int    // concurrent sbatch processes
	// PlainSized submits SizedWorkload to the plain cluster (the control:
	// the same requests the plugin makes, without the plugin).
	PlainSized bool
	Progress   io.Writer
}

// Throughput is what SubmitThroughput measured: one entry per round.
type Throughput struct {
	Ratios                  []float64 // plugin sbatch/s over plain sbatch/s
	PlainRate, PluginRate   []float64 // sbatch/s
	PlainCPUus, PluginCPUus []float64 // slurmctld CPU per submission, µs
	// CPUDiffus is PluginCPUus - PlainCPUus of each round: both queues
	// have the same length then, so the growth of the per-job cost with
	// the queue cancels out.
	CPUDiffus []float64
}

// Median of a copy of v.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// SubmitThroughput runs two clusters side by side, one plain and one with
// the plugin setup, and submits alternating batches of MixedWorkload to
// them (ABBA order, so a drift of the shared machine's load or the growing
// queue hits both alike). Every job stays pending behind an exclusive
// holder, so only submission is measured. Each round yields one ratio of
// sbatch throughputs; the median over rounds is the figure to quote.
func SubmitThroughput(ctx context.Context, o ThroughputOptions, plain, plugin Setup) (Throughput, error) {
	var out Throughput
	dir, err := Options{Root: o.Root, PluginDir: o.PluginDir}.pluginDir()
	if err != nil {
		return out, err
	}
	o.PluginDir = dir
	up := func(s Setup, sub string, port int) (*slurmcluster.Cluster, error) {
		return slurmcluster.Up(ctx, o.Root, slurmcluster.Options{
			Dir: filepath.Join(o.Dir, sub), Nodes: 1, GPUsPerNode: benchGPUs, CPUsPerNode: benchCPUs, MemPerNode: benchMemMB, PortBase: port,
			Priority: s.Priority, Preempt: s.Preempt, JobSubmit: s.JobSubmit,
			PluginDir: o.PluginDir, LachesisYAML: s.YAML, ExtraConf: s.Extra,
		})
	}
	a, err := up(plain, "plain", o.PortBase)
	if a != nil {
		defer a.Down() //nolint:errcheck
	}
	if err != nil {
		return out, err
	}
	b, err := up(plugin, "plugin", o.PortBase+10)
	if b != nil {
		defer b.Down() //nolint:errcheck
	}
	if err != nil {
		return out, err
	}
	workload := map[*slurmcluster.Cluster]func(int) []string{a: MixedWorkload, b: MixedWorkload}
	if o.PlainSized {
		workload[a] = SizedWorkload
	}
	for _, c := range []*slurmcluster.Cluster{a, b} {
		if _, err := c.Submit("-J", "holder", "--exclusive", "--gpus=4", "--output=/dev/null", "--wrap", "sleep 3600"); err != nil {
			return out, err
		}
		// Warm-up, not counted: the first submissions fill caches
		// (the plugin's partition summary, the core's first sizing).
		if _, err := submitBatch(c, workload[c], o.Batch/4, o.Workers); err != nil {
			return out, err
		}
	}
	for r := 0; r < o.Rounds; r++ {
		order := []*slurmcluster.Cluster{a, b}
		if r%2 == 1 {
			order = []*slurmcluster.Cluster{b, a}
		}
		got := map[*slurmcluster.Cluster]batchResult{}
		for _, c := range order {
			res, err := submitBatch(c, workload[c], o.Batch, o.Workers)
			if err != nil {
				return out, err
			}
			got[c] = res
		}
		pa, pb := got[a], got[b]
		out.PlainRate = append(out.PlainRate, pa.rate)
		out.PluginRate = append(out.PluginRate, pb.rate)
		out.PlainCPUus = append(out.PlainCPUus, pa.cpuPerJob*1e6)
		out.PluginCPUus = append(out.PluginCPUus, pb.cpuPerJob*1e6)
		out.CPUDiffus = append(out.CPUDiffus, (pb.cpuPerJob-pa.cpuPerJob)*1e6)
		out.Ratios = append(out.Ratios, pb.rate/pa.rate)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  round %2d: plain %6.1f sbatch/s (%4.0f µs ctld CPU/job), %s %6.1f sbatch/s (%4.0f µs), ratio %.3f\n",
				r+1, pa.rate, pa.cpuPerJob*1e6, plugin.Label, pb.rate, pb.cpuPerJob*1e6, pb.rate/pa.rate)
		}
	}
	return out, nil
}

type batchResult struct {
	rate      float64 // sbatch/s
	cpuPerJob float64 // slurmctld CPU seconds per submission
}

// submitBatch submits n jobs of workload with the given concurrency.
func submitBatch(c *slurmcluster.Cluster, workload func(int) []string, n, workers int) (batchResult, error) {
	pid, err := c.ControllerPID()
	if err != nil {
		return batchResult{}, err
	}
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		return batchResult{}, err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := c.Submit(workload(int(i))...); err != nil {
					errs <- fmt.Errorf("submission %s: %w", strconv.FormatInt(i, 10), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return batchResult{}, err
	}
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		return batchResult{}, err
	}
	return batchResult{rate: float64(n) / wall, cpuPerJob: (cpu1 - cpu0) / float64(n)}, nil
}
