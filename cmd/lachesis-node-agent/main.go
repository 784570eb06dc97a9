// Command lachesis-node-agent is Lachesis's daemon on every compute node: it
// runs profiling sweeps for lachesis-profiler as the requesting user, spools
// every result in its own SQLite file, delivers profiles to the Lachesis
// core in slurmctld (munge-authenticated msgpack over TCP) and reports GPU
// telemetry. See package node-agent for the parts and etc/node-agent.yaml
// for the configuration.
//
//	lachesis-node-agent [-config /etc/lachesis/node-agent.yaml] [-check]
//
// This file only wires; the logic lives in node-agent/... .
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/util/logging"
	"github.com/lachesis-sched/lachesis/node-agent/agent"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/jobprogress"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
	"github.com/lachesis-sched/lachesis/profiler"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "lachesis-node-agent:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("lachesis-node-agent", flag.ContinueOnError)
	path := fs.String("config", config.DefaultPath, "the agent's YAML configuration")
	check := fs.Bool("check", false, "validate the configuration and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	if *check {
		fmt.Printf("%s: valid (node %s, controller %s)\n", *path, cfg.Node, cfg.Controller)
		return nil
	}

	level := new(slog.LevelVar)
	level.Set(logging.ParseLevel(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	// The profiler logs through the default logger.
	slog.SetDefault(log)

	gpus, procs, err := openGPUs(cfg, log)
	if err != nil {
		return err
	}
	a, err := agent.New(cfg, agent.Deps{
		Signer:    &munge.Client{Socket: cfg.MungeSocket},
		Profile:   profiler.Profile,
		Telemetry: gpus,
		Processes: procs,
		NodeGres:  agent.ScontrolGres(cfg.Node),
		// Jobs that opt in report their iterations on the agent's socket
		// (etc/lachesis_progress.py).
		ProgressTracker: jobprogress.New(jobprogress.Config{}),
	}, log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return a.Run(ctx)
}

// openGPUs is NVML, or the fake GPU device where fake_gpu.dir is set (test
// and demo only). NVML without a driver gives a source that says so and no
// per-process use.
func openGPUs(cfg config.Config, log *slog.Logger) (telemetry.Source, telemetry.ProcessSource, error) {
	if cfg.FakeGPU.Dir != "" {
		if err := telemetry.PrepareFakeDir(cfg.FakeGPU.Dir); err != nil {
			return nil, nil, err
		}
		log.Warn("fake GPU device in place of NVML (fake_gpu.dir: test and demo only)",
			"dir", cfg.FakeGPU.Dir, "gpus", cfg.FakeGPU.GPUs)
		f := &telemetry.Fake{Dir: cfg.FakeGPU.Dir, GPUs: cfg.FakeGPU.GPUs, Node: cfg.Node}
		return f, f, nil
	}
	gpus, err := telemetry.Open(nvml.New(), log)
	if err != nil {
		log.Warn("GPU telemetry off", "err", err)
	}
	procs, _ := gpus.(telemetry.ProcessSource)
	return gpus, procs, nil
}
