package ctldbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// Setup is one configuration under test.
type Setup struct {
	Label     string
	Priority  string
	Preempt   string
	JobSubmit string
	Extra     string
	YAML      string
}

// Result is what one setup measured.
type Result struct {
	Label         string
	Jobs          int
	SubmitSeconds float64 // wall time to submit all jobs
	CPUSeconds    float64 // slurmctld user+system CPU during the window
	Window        time.Duration
	Passes        []time.Duration // Lachesis passes seen in the window
}

// SubmitRate is jobs accepted per second of wall time.
func (r Result) SubmitRate() float64 { return float64(r.Jobs) / r.SubmitSeconds }

// Options of a benchmark run.
type Options struct {
	Root, Dir string
	Jobs      int
	Window    time.Duration
	Workers   int // concurrent sbatch processes
	PortBase  int
	PluginDir string // Lachesis plugins; default the build tree's (slurmcluster.BuildTree)
}

// Run fills the queue with Options.Jobs pending one-GPU jobs behind a job
// holding every GPU, then watches slurmctld for Options.Window.
func Run(ctx context.Context, o Options, s Setup) (Result, error) {
	pluginDir, err := o.pluginDir()
	if err != nil {
		return Result{}, err
	}
	c, err := slurmcluster.Up(ctx, o.Root, slurmcluster.Options{
		Dir: o.Dir, Nodes: 1, GPUsPerNode: 4, PortBase: o.PortBase, Priority: s.Priority, Preempt: s.Preempt, JobSubmit: s.JobSubmit,
		PluginDir: pluginDir, LachesisYAML: s.YAML, ExtraConf: s.Extra,
	})
	if err != nil {
		return Result{}, err
	}
	defer c.Down() //nolint:errcheck
	res := Result{Label: s.Label, Jobs: o.Jobs, Window: o.Window}
	if _, err := c.Submit("-J", "holder", "--gpus=4", "--wrap", "sleep 3600"); err != nil {
		return res, err
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.Workers)
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(o.Jobs) {
				if _, err := c.Submit("-J", "queued", "--gpus=1", "--output=/dev/null", "--wrap", "sleep 60"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	res.SubmitSeconds = time.Since(start).Seconds()

	time.Sleep(3 * time.Second) // let the submission burst settle
	pid, err := c.ControllerPID()
	if err != nil {
		return res, err
	}
	logSize := fileSize(filepath.Join(o.Dir, "log", "slurmctld.log"))
	cpu0, err := cpuSeconds(pid)
	if err != nil {
		return res, err
	}
	select {
	case <-time.After(o.Window):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	cpu1, err := cpuSeconds(pid)
	if err != nil {
		return res, err
	}
	res.CPUSeconds = cpu1 - cpu0
	res.Passes = slurmcluster.PassTimes(c.ControllerLog()[logSize:])
	// A Lachesis setup passes every pass_interval: none in the window means
	// the plugin is not running, or its log line changed, and a table of
	// zeros would read as "passes cost nothing".
	if s.Priority == "priority/tiresias" && len(res.Passes) == 0 {
		return res, fmt.Errorf("no Lachesis pass in slurmctld's log during the %v window (want the verbose line \"priority/tiresias: pass ranked ... in usec=N\"; see %s)",
			o.Window, filepath.Join(o.Dir, "log", "slurmctld.log"))
	}
	return res, nil
}

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// cpuSeconds is a process's user+system CPU time from /proc/PID/stat.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime, stime are 14, 15.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (ut + st) / clockTicks, nil
}

// Percentile of sorted-in-place durations (p in [0,1]).
func Percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

// pluginDir is Options.PluginDir, or the plugins of the build tree of the
// Slurm release this machine runs.
func (o Options) pluginDir() (string, error) {
	if o.PluginDir != "" {
		return o.PluginDir, nil
	}
	tree, err := slurmcluster.BuildTree(o.Root)
	if err != nil {
		return "", err
	}
	return filepath.Join(tree, "plugins"), nil
}

// SelectSetups keeps the setups named in a comma-separated list of
// labels, in their original order; an empty list keeps all.
func SelectSetups(all []Setup, only string) []Setup {
	if only == "" {
		return all
	}
	want := map[string]bool{}
	for _, l := range strings.Split(only, ",") {
		want[strings.TrimSpace(l)] = true
	}
	var out []Setup
	for _, s := range all {
		if want[s.Label] {
			out = append(out, s)
		}
	}
	return out
}
