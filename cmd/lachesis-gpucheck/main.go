// Command lachesis-gpucheck holds the node agent's per-process GPU figures
// (package node-agent/telemetry's NVML source, opened as the agent opens
// it) against the driver's own (nvidia-smi) and against the loads the GPU
// check started (lachesis-gpuload), printing both side by side and where
// they disagree. scripts/gpu-check.sh runs it in phases; docs/gpu-check.md
// says how and what it printed on a real GPU. Package internal/rigs/gpucheck
// holds the logic.
//
//	lachesis-gpucheck -phase pair -load a:1234:60:2048 -load b:1235:25:6144 -intervals 5s,5s,30s
//
// Exit status: 0 when every comparison agreed, 1 when the agent's figures
// disagreed with the driver's (or its path failed), 2 when the check could
// not run, 3 when the agent agreed with the driver but the driver's own
// per-process figures were off what the loads did.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/lachesis-sched/lachesis/internal/rigs/gpucheck"
	"github.com/lachesis-sched/lachesis/internal/rigs/gpuload"
)

func main() {
	res, err := run(os.Args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case err != nil:
		fmt.Fprintln(os.Stderr, "lachesis-gpucheck:", err)
		os.Exit(2)
	case res.Fails > 0:
		os.Exit(1)
	case res.DriverOff > 0:
		os.Exit(3)
	}
}

func run(args []string) (gpucheck.Result, error) {
	cfg := gpucheck.Config{Tol: gpucheck.DefaultTolerance}
	var intervals, jsonPath, smi string
	fs := flag.NewFlagSet("lachesis-gpucheck", flag.ContinueOnError)
	fs.StringVar(&cfg.Phase, "phase", "", "name of this phase, printed and kept in -json")
	fs.Func("load", "a process started for the check, NAME:PID:BUSY:MEMMIB (repeat)", func(s string) error {
		l, err := gpucheck.ParseLoad(s)
		cfg.Loads = append(cfg.Loads, l)
		return err
	})
	fs.StringVar(&intervals, "intervals", "5s,5s", "the rounds: how long each waits before calling the agent's source again (\"\" with -cadence: none)")
	fs.DurationVar(&cfg.Cadence, "cadence", 0, "after the rounds, poll NVML's per-process samples this long: how often one appears and what it reads")
	fs.BoolVar(&cfg.BusyIsDemand, "busy-is-demand", false, "the loads together ask for more than the GPU's time: hold the agent to pmon, not to each load's busy share")
	fs.BoolVar(&cfg.MPS, "mps", false, "the loads are MPS clients: also read NVML's MPS list and say what the agent's list shows")
	fs.Float64Var(&cfg.Tol.MemMiB, "mem-tol-mib", cfg.Tol.MemMiB, "agent vs nvidia-smi memory of a process, MiB")
	fs.Float64Var(&cfg.Tol.OverheadMiB, "overhead-mib", cfg.Tol.OverheadMiB, "memory a process may hold beyond its allocation (its CUDA context), MiB")
	fs.Float64Var(&cfg.Tol.UtilPts, "util-tol", cfg.Tol.UtilPts, "agent utilisation vs busy set and vs pmon, percentage points")
	fs.StringVar(&jsonPath, "json", "", "write every reading and finding to this file")
	fs.StringVar(&smi, "nvidia-smi", "nvidia-smi", "the driver's nvidia-smi")
	if err := fs.Parse(args); err != nil {
		return gpucheck.Result{}, err
	}
	if fs.NArg() > 0 {
		return gpucheck.Result{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.Intervals, err = gpucheck.ParseIntervals(intervals); err != nil {
		return gpucheck.Result{}, err
	}
	if err := cfg.Validate(); err != nil {
		return gpucheck.Result{}, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	lib := nvml.New()
	gpus, procs, err := gpucheck.OpenAgent(lib, log)
	if err != nil {
		return gpucheck.Result{}, err
	}
	defer gpus.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := gpucheck.Run(ctx, cfg, gpucheck.Sources{
		Agent: procs, AgentGPUs: gpus, Driver: gpucheck.NvidiaSMI{Path: smi},
		Raw: gpucheck.NVMLRaw{Lib: lib}, Clock: gpuload.RealClock{},
	}, os.Stdout)
	if jsonPath != "" {
		b, jerr := json.MarshalIndent(res, "", " ")
		if jerr == nil {
			jerr = os.WriteFile(jsonPath, b, 0o644)
		}
		err = errors.Join(err, jerr)
	}
	return res, err
}
