// Command lachesis-demo is `make demo`: bundled workloads on a loopback
// Slurm cluster, each run with Lachesis and with a baseline, side by side.
// `-part profile` is `make demo-profile` instead: a real PyTorch training
// job profiled through the node agent and then sized by the controller.
// The logic lives in internal/rigs/demo; this file only wires flags to it.
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

	"github.com/lachesis-sched/lachesis/internal/util/progressbar"

	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

func main() {
	part := flag.String("part", "all", "which comparison to run: tiresias, synergy, sharing or all; or profile (make demo-profile)")
	dir := flag.String("dir", "", "cluster directory (default /tmp/lachesis-demo, /tmp/lachesis-dp for -part profile)")
	portBase := flag.Int("port-base", 0, "first of the cluster's TCP ports (default: the cluster script's, 16817); tiresias, synergy, sharing")
	var pd demo.ProfileDemo
	flag.StringVar(&pd.Bin, "bin", "", "profile: directory of the built lachesis-node-agent and lachesis-profiler (default: the build tree's bin)")
	flag.StringVar(&pd.User, "user", "lachesis-demo", "profile: the unprivileged user who profiles and submits (created if missing)")
	flag.StringVar(&pd.Model, "model", "imagecnn", "profile: the model's key")
	flag.IntVar(&pd.PointSeconds, "point-seconds", 30, "profile: seconds per CPU count of the sweep")
	flag.IntVar(&pd.JobSteps, "job-steps", 150, "profile: training steps of the sbatch'd job")
	flag.StringVar(&pd.Python, "python", "/usr/bin/python3", "profile: the interpreter with Debian's torch and torchvision")
	flag.StringVar(&pd.PNG, "png", "", "profile: where the throughput chart goes (default: demo-profile.png in the build tree)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *part == "profile" {
		err = runProfile(ctx, pd, *dir)
	} else {
		if *dir == "" {
			*dir = "/tmp/lachesis-demo"
		}
		err = run(ctx, *part, *dir, *portBase)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lachesis-demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, part, dir string, portBase int) error {
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	fragment, err := os.ReadFile(filepath.Join(root, "etc", "slurm.conf.lachesis"))
	if err != nil {
		return err
	}
	// Results and commands: the build tree of the Slurm under test, so
	// the demo on 22.05 and on 24.11 keep their figures apart.
	tree, err := slurmcluster.BuildTree(root)
	if err != nil {
		return err
	}
	live := progressbar.IsTerminal(os.Stdout)
	if part == "tiresias" || part == "all" {
		jobs, err := readWorkload(root, "etc/demo/workload.csv")
		if err != nil {
			return err
		}
		a, b := demo.TiresiasScenarios(string(fragment), dir)
		p := demo.Part{Title: "Tiresias: who waits for whom", Jobs: jobs, A: a, B: b,
			Runner:  &demo.Runner{Root: root, Dir: dir, Nodes: 2, GPUs: 4, Out: os.Stdout, Live: live, PollEvery: time.Second, PortBase: portBase},
			Results: filepath.Join(tree, "demo-tiresias.csv")}
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
				Out: os.Stdout, Live: live, PollEvery: time.Second, PortBase: portBase},
			Results: filepath.Join(tree, "demo-synergy.csv")}
		if err := p.Run(ctx, os.Stdout); err != nil {
			return err
		}
	}
	if part == "sharing" || part == "all" {
		f, err := os.Open(filepath.Join(root, "etc", "demo", "sharing-workload.csv"))
		if err != nil {
			return err
		}
		const gpus, shards = 4, 4
		jobs, err := demo.ParseSharingWorkload(f, shards)
		f.Close()
		if err != nil {
			return err
		}
		p := demo.SharingPart{Root: root, Dir: dir, Bin: filepath.Join(tree, "bin"), Fragment: string(fragment),
			Jobs: jobs, GPUs: gpus, Shards: shards, Results: filepath.Join(tree, "demo-sharing.csv"), Out: os.Stdout, Live: live, PortBase: portBase}
		if err := p.Run(ctx); err != nil {
			return err
		}
	}
	return nil
}

// runProfile completes pd's paths from the repository root and runs it.
func runProfile(ctx context.Context, pd demo.ProfileDemo, dir string) error {
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		return err
	}
	if dir == "" {
		// Short: the node agent's unix socket lives in it.
		dir = "/tmp/lachesis-dp"
	}
	pd.Root, pd.Dir = root, dir
	tree, err := slurmcluster.BuildTree(root)
	if err != nil {
		return err
	}
	if pd.Bin == "" {
		pd.Bin = filepath.Join(tree, "bin")
	}
	if pd.PNG == "" {
		pd.PNG = filepath.Join(tree, "demo-profile.png")
	}
	if !filepath.IsAbs(pd.Bin) {
		pd.Bin = filepath.Join(root, pd.Bin)
	}
	if !filepath.IsAbs(pd.PNG) {
		pd.PNG = filepath.Join(root, pd.PNG)
	}
	if err := os.MkdirAll(filepath.Dir(pd.PNG), 0o755); err != nil {
		return err
	}
	pd.Out, pd.Stdout, pd.Stderr = os.Stdout, os.Stdout, os.Stderr
	return pd.Run(ctx)
}

func readWorkload(root, path string) ([]demo.Job, error) {
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return demo.ParseWorkload(f)
}
