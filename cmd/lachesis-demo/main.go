// Command lachesis-demo is `make demo`: the bundled workload on a loopback
// Slurm cluster under Lachesis and under priority/multifactor, side by side.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lachesis-sched/lachesis/internal/demo"
	"github.com/lachesis-sched/lachesis/internal/slurmcluster"
)

func main() {
	workload := flag.String("workload", "etc/demo/workload.csv", "workload CSV (name,arrival_s,gpus,work_s)")
	dir := flag.String("dir", "/tmp/lachesis-demo", "cluster directory")
	nodes := flag.Int("nodes", 2, "nodes")
	gpus := flag.Int("gpus", 4, "GPUs per node")
	results := flag.String("results", "build/demo-results.csv", "where to write per-job results")
	flag.Parse()
	if err := run(*workload, *dir, *nodes, *gpus, *results); err != nil {
		fmt.Fprintln(os.Stderr, "lachesis-demo:", err)
		os.Exit(1)
	}
}

func run(workloadPath, dir string, nodes, gpus int, results string) error {
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(root, workloadPath))
	if err != nil {
		return err
	}
	jobs, err := demo.ParseWorkload(f)
	f.Close()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fragment, err := os.ReadFile(filepath.Join(root, "etc", "slurm.conf.lachesis"))
	if err != nil {
		return err
	}
	fi, _ := os.Stdout.Stat()
	r := &demo.Runner{Root: root, Dir: dir, Nodes: nodes, GPUs: gpus, Out: os.Stdout,
		Live: fi != nil && fi.Mode()&os.ModeCharDevice != 0, PollEvery: time.Second}

	lachesis := demo.Scenario{
		Label: "tiresias", Priority: "priority/tiresias", Preempt: "preempt/tiresias",
		Extra: string(fragment), ShowQueues: true,
		// Thresholds scaled to a minutes-long demo: a 4-GPU job leaves
		// queue 0 after 10 s, queue 1 after 100 s.
		YAML: fmt.Sprintf("tiresias:\n  thresholds: [40, 400]\npass_interval: 1\ndb_path: %s\n",
			filepath.Join(dir, "lachesis", "lachesis.db")),
	}
	multifactor := demo.Scenario{
		Label: "multifactor", Priority: "priority/multifactor", Preempt: "preempt/none",
		Extra: "PriorityWeightAge=1000\nPriorityWeightJobSize=0\n",
	}
	fmt.Printf("Lachesis demo: %d jobs on %d nodes x %d GPUs, first under Lachesis, then under priority/multifactor.\n", len(jobs), nodes, gpus)
	a, err := r.Run(ctx, lachesis, jobs)
	if err != nil {
		return fmt.Errorf("tiresias run: %w", err)
	}
	fmt.Printf("\nLachesis run done (average JCT %.1f s). Now the same workload under priority/multifactor.\n", demo.Average(a).Seconds())
	b, err := r.Run(ctx, multifactor, jobs)
	if err != nil {
		return fmt.Errorf("multifactor run: %w", err)
	}
	demo.Report(os.Stdout, lachesis.Label, a, multifactor.Label, b)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, results)), 0o755); err == nil {
		if err := demo.WriteCSV(filepath.Join(root, results), lachesis.Label, a, multifactor.Label, b); err == nil {
			fmt.Printf("per-job results: %s\n", results)
		}
	}
	return nil
}
