// Command lachesis-demo is `make demo`: bundled workloads on a loopback
// Slurm cluster, each run with Lachesis and with a baseline, side by side.
// The logic lives in internal/demo; this file only wires flags to it.
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

	"github.com/lachesis-sched/lachesis/internal/util/progress"

	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

func main() {
	part := flag.String("part", "all", "which comparison to run: tiresias, synergy or all")
	dir := flag.String("dir", "/tmp/lachesis-demo", "cluster directory")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *part, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "lachesis-demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, part, dir string) error {
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	fragment, err := os.ReadFile(filepath.Join(root, "etc", "slurm.conf.lachesis"))
	if err != nil {
		return err
	}
	live := progress.IsTerminal(os.Stdout)
	if part == "tiresias" || part == "all" {
		jobs, err := readWorkload(root, "etc/demo/workload.csv")
		if err != nil {
			return err
		}
		a, b := demo.TiresiasScenarios(string(fragment), dir)
		p := demo.Part{Title: "Tiresias: who waits for whom", Jobs: jobs, A: a, B: b,
			Runner:  &demo.Runner{Root: root, Dir: dir, Nodes: 2, GPUs: 4, Out: os.Stdout, Live: live, PollEvery: time.Second},
			Results: filepath.Join(root, "build", "demo-tiresias.csv")}
		if err := p.Run(ctx, os.Stdout); err != nil {
			return err
		}
	}
	if part == "synergy" || part == "all" {
		jobs, err := readWorkload(root, "etc/demo/synergy-workload.csv")
		if err != nil {
			return err
		}
		f, err := os.Open(filepath.Join(root, "etc", "demo", "models.csv"))
		if err != nil {
			return err
		}
		models, err := demo.ParseModels(f)
		f.Close()
		if err != nil {
			return err
		}
		// 12 CPUs and 48000 MB for 4 GPUs: a share of 3 CPUs, 12000 MB.
		a, b := demo.SynergyScenarios(string(fragment), dir, models, 3, 12000)
		p := demo.Part{Title: "Synergy: CPUs sized by profile", Jobs: jobs, A: a, B: b, ShowCPUs: true,
			Runner: &demo.Runner{Root: root, Dir: dir, Nodes: 2, GPUs: 4, CPUs: 12, MemMB: 48000,
				Out: os.Stdout, Live: live, PollEvery: time.Second},
			Results: filepath.Join(root, "build", "demo-synergy.csv")}
		if err := p.Run(ctx, os.Stdout); err != nil {
			return err
		}
	}
	return nil
}

func readWorkload(root, path string) ([]demo.Job, error) {
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return demo.ParseWorkload(f)
}
