// Command lachesis-replay is `make fidelity`: a slice of a job list
// replayed, time-compressed, on the loopback Slurm cluster and the same
// jobs through the simulator, side by side (issue 23). The logic lives in
// internal/rigs/replay; this file only wires flags to it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/internal/rigs/replay"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
	"github.com/lachesis-sched/lachesis/sim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lachesis-replay:", err)
		os.Exit(1)
	}
}

func run() error {
	trace := flag.String("trace", "data/philly/philly_jobs.csv", "job list: Philly table, Tiresias job file, Lachesis job list or sacct output")
	format := flag.String("format", "auto", "trace format: auto, philly, tiresias, joblist, sacct")
	vc := flag.String("vc", "b436b2", "keep jobs of these virtual clusters (comma-separated; empty: all)")
	skip := flag.Int("skip", 560, "drop the first N selected jobs")
	limit := flag.Int("jobs", 60, "keep N jobs")
	compression := flag.Float64("compression", 20, "divide every time (trace and settings) by this")
	policies := flag.String("policies", "multifactor,gittins", "policies to replay: "+strings.Join(replay.Policies, ", "))
	nodes := flag.Int("nodes", 4, "slurmd nodes")
	gpus := flag.Int("gpus-per-node", 4, "GPUs per node")
	cpus := flag.Int("cpus-per-node", 8, "CPUs per node")
	mem := flag.Int("mem-per-node", 16000, "memory per node, MB")
	dir := flag.String("dir", "/tmp/lachesis-replay", "cluster directory")
	portBase := flag.Int("port-base", 0, "first loopback port (0: scripts/cluster.sh's default)")
	penalty := flag.Float64("restart-penalty", 1, "simulator: replay seconds a requeued job loses (the sleeper saves its progress once a second)")
	tick := flag.Float64("scheduler-tick", replay.DefaultSchedulerTick, "simulator: slurmctld's background loop period, seconds (starts an arrival or a completion allows wait for its next round)")
	launch := flag.Float64("launch-overhead", replay.DefaultLaunchOverhead, "simulator: replay seconds each run holds its GPUs beyond its work (batch launch, end report; the table's 'run beyond duration' measures it)")
	backfill := flag.Float64("backfill-interval", replay.DefaultBackfillInterval, "simulator: sched/backfill's cycle, seconds (bf_interval: jobs behind one the main scheduler cannot start wait for it)")
	modelsPath := flag.String("models", "etc/demo/models.csv", "the sizing replays' models (synergy, proportional)")
	csvOut := flag.String("csv", "build/fidelity.csv", "per-job outcomes of both sides (empty: none)")
	flag.Parse()
	if os.Geteuid() != 0 {
		return fmt.Errorf("run it as root: it starts slurmctld, slurmd and munged")
	}
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	path := *trace
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	t, err := sim.LoadTrace(path, sim.Format(*format))
	if err != nil {
		return err
	}
	var clusters []string
	if *vc != "" {
		clusters = strings.Split(*vc, ",")
	}
	slice, err := replay.Slice(t, clusters, *skip, *limit, *gpus)
	if err != nil {
		return err
	}
	scaled, _, err := replay.ScaleTrace(slice, *compression, *gpus)
	if err != nil {
		return err
	}
	models, err := loadModels(root, *modelsPath)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &replay.Replayer{Root: root, Dir: *dir, Nodes: *nodes, GPUs: *gpus, CPUs: *cpus, MemMB: *mem,
		PortBase: *portBase, Compression: *compression, Settings: replay.DefaultTraceSettings(),
		RestartPenalty: *penalty, SchedulerTick: *tick, LaunchOverhead: *launch, BackfillInterval: *backfill, Out: os.Stdout, Models: models}
	fmt.Printf("%s: %d jobs of %d GPUs or fewer (virtual clusters %q, skip %d), %.1f GPU-hours over %.0f s; replayed at 1/%g\n",
		t.Name, len(slice.Jobs), *gpus, *vc, *skip, slice.GPUSeconds()/3600, slice.Span(), *compression)
	var cs []replay.Comparison
	for _, p := range strings.Split(*policies, ",") {
		c, err := r.Run(ctx, strings.TrimSpace(p), scaled)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		replay.WriteTable(os.Stdout, *compression, []replay.Comparison{c})
		if *csvOut != "" { // after each policy: a long run keeps what it measured
			if err := replay.WriteOutcomesCSV(csvPath(root, *csvOut), cs); err != nil {
				return err
			}
		}
	}
	if len(cs) > 1 {
		replay.WriteTable(os.Stdout, *compression, cs)
	}
	if *csvOut != "" {
		fmt.Println("per-job outcomes:", csvPath(root, *csvOut))
	}
	return nil
}

// csvPath is the per-job CSV's path, relative paths under root.
func csvPath(root, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, p)
}

// loadModels reads the sizing replays' models (demo.ParseModels).
func loadModels(root, path string) (map[string]demo.Model, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return demo.ParseModels(f)
}
