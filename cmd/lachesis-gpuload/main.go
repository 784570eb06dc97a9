// Command lachesis-gpuload keeps one NVIDIA GPU busy for a chosen share of
// the time and holds a chosen amount of its memory, needing only the
// driver (libcuda.so.1, loaded at run time; no CUDA toolkit). It is the
// load of the GPU check (docs/gpu-check.md); package internal/rigs/gpuload
// holds the logic.
//
//	lachesis-gpuload -busy 60 -mem-mib 2048 -duration 2m
//
// prints a "ready pid=..." line once the memory is held and the kernel
// calibrated, and a "done ..." line at the end; with -wait-usr1 it starts
// the load only on SIGUSR1. SIGINT or SIGTERM end it early (exit 0).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/gpuload"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "lachesis-gpuload:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg gpuload.Config
	var waitUSR1 bool
	fs := flag.NewFlagSet("lachesis-gpuload", flag.ContinueOnError)
	fs.Float64Var(&cfg.BusyPct, "busy", 50, "percent of each period the GPU runs the spin kernel (0: memory only)")
	fs.IntVar(&cfg.MemMiB, "mem-mib", 1024, "MiB of device memory to allocate, write and hold")
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long the load runs after start-up")
	fs.DurationVar(&cfg.Period, "period", gpuload.DefaultPeriod, "one busy-then-idle cycle")
	fs.DurationVar(&cfg.Kernel, "kernel", gpuload.DefaultKernel, "longest spin kernel (the busy share is a whole number of kernels)")
	fs.IntVar(&cfg.GPU, "gpu", 0, "CUDA device index (CUDA_VISIBLE_DEVICES applies)")
	fs.StringVar(&cfg.Library, "libcuda", gpuload.DefaultLibrary, "the CUDA driver library")
	fs.BoolVar(&waitUSR1, "wait-usr1", false, "after the ready line, start the load only on SIGUSR1")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var start chan struct{}
	if waitUSR1 {
		// Caught before the ready line is printed: SIGUSR1's default
		// action would end the process.
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		start = make(chan struct{})
		go func() { <-usr1; close(start) }()
	}
	return gpuload.Load(ctx, cfg, os.Stdout, start)
}
