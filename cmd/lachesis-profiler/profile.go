package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/lachesis-sched/lachesis/internal/util/progressbar"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/profiler"
)

func agentSocketFlag(fs *flag.FlagSet) *string {
	return fs.String("agent-socket", config.Default().Socket, "the node agent's unix socket")
}

func cmdProfile(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("profile", stderr)
	var req localapi.ProfileRequest
	fs.StringVar(&req.Model, "model", "", "model key jobs name with --comment=model=NAME or their job name (required)")
	fs.StringVar(&req.Regex, "regex", "", "regex whose first group is the throughput in the command's output (default: "+profiler.DefaultRegex+")")
	fs.Float64Var(&req.PointSeconds, "point-seconds", 0, "seconds the command runs at each CPU count (default: "+profiler.DefaultPointDuration.String()+")")
	fs.StringVar(&req.DatasetPath, "dataset", "", "the command's dataset, a file or directory, for the memory model")
	fs.IntVar(&req.GPUs, "gpus", 0, "GPUs the command uses (0: CPU-only, profiled as one GPU)")
	fs.IntVar(&req.MaxCPUs, "max-cpus", 0, "largest CPU count to sweep (0: all)")
	fs.BoolVar(&req.UseNVML, "nvml", false, "use GPU utilisation (NVML) as the throughput signal instead of --regex")
	srunArgs := fs.String("srun-args", "", "options for the srun that submits the profiling job when not inside one (e.g. \"-p gpu --mem=16G\")")
	socket := agentSocketFlag(fs)
	argv, err := parse(fs, args)
	if err != nil {
		return err
	}
	if req.Model == "" || len(argv) == 0 {
		fmt.Fprintln(stderr, "profile needs --model NAME and a command after --")
		fs.Usage()
		return errUsage
	}
	// A sweep runs inside a job of yours on the node: outside one, this
	// command submits one with srun and runs itself in it.
	if os.Getenv("SLURM_JOB_ID") == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		return execSrun(srunArgv(self, args, req, strings.Fields(*srunArgs)))
	}
	req.Argv = argv
	// The agent finds the command on this PATH, as this user.
	req.Env = os.Environ()
	if req.Dir, err = os.Getwd(); err != nil {
		return err
	}
	// The agent does not share this working directory.
	if req.DatasetPath != "" {
		if req.DatasetPath, err = filepath.Abs(req.DatasetPath); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	bar := newProfileProgress(stderr, progressbar.IsTerminal(stderr))
	res, err := localapi.Profile(ctx, *socket, req, bar.update)
	bar.done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "profile %s of %s: %d points; best case %d CPUs and %.2f GB per GPU\n",
		res.ID, res.Model, res.Points, res.Best.CPUsPerGPU, res.Best.MemGBPerGPU)
	switch {
	case res.Refused != "":
		return fmt.Errorf("the controller refused this profile and will not store it (ask your admin about the quota): %s", res.Refused)
	case res.Delivered:
		fmt.Fprintln(stdout, "delivered to the controller")
	default:
		fmt.Fprintln(stdout, "waiting in the node agent's spool; it reaches the controller as soon as slurmctld answers")
	}
	return nil
}

// srunArgv is the srun command line that runs `self profile args` in a
// job of its own: one task on one node, with the CPUs the sweep may use
// (--max-cpus) and the GPUs the workload uses, then the user's own srun
// options, which may override them. The job is named lachesis-profile, not
// after the model: its name would be its model key, and sizing it by the
// profile being made is circular.
func srunArgv(self string, args []string, req localapi.ProfileRequest, extra []string) []string {
	argv := []string{"srun", "--nodes=1", "--ntasks=1", "--job-name=lachesis-profile"}
	if req.MaxCPUs > 0 {
		argv = append(argv, fmt.Sprintf("--cpus-per-task=%d", req.MaxCPUs))
	}
	if req.GPUs > 0 {
		argv = append(argv, fmt.Sprintf("--gpus=%d", req.GPUs))
	}
	argv = append(argv, extra...)
	return append(append(argv, "--", self, "profile"), args...)
}

// execSrun replaces this process with srun (found on PATH), which passes
// on signals to the job's step and exits with its status. A variable, so
// that tests see what would run.
var execSrun = func(argv []string) error {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("not inside a Slurm job (SLURM_JOB_ID is unset) and no srun to submit one: %w", err)
	}
	return syscall.Exec(path, argv, os.Environ())
}

func cmdStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("status", stderr)
	socket := agentSocketFlag(fs)
	if rest, err := parse(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, rest)
	}
	st, err := localapi.GetStatus(context.Background(), *socket)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "node %s, controller %s\nprofiles: %d waiting in the spool, %d delivered\ntelemetry: %s\n",
		st.Node, st.Controller, st.Pending, st.Delivered, st.Telemetry)
	if st.Running != "" {
		fmt.Fprintf(stdout, "profiling now: %s\n", st.Running)
	}
	if st.Queued > 0 {
		fmt.Fprintf(stdout, "queued: %d more\n", st.Queued)
	}
	return nil
}
