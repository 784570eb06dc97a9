// Command lachesis-synth is a synthetic training job for the profiler's
// tests and the demo: its throughput grows with the CPU cores it gets up to
// a knee and not beyond. See package profiler/synth for the model.
//
//	lachesis-synth -knee 3 -seconds 20
//
// prints "step N R it/s" lines to stdout and exits 0.
//
// With -fake-gpu-dir (the node agent's fake_gpu.dir: test and demo only)
// it runs "on" the fake GPUs of CUDA_VISIBLE_DEVICES, keeping a record
// there for the agent, and slows down while another process shares one of
// them: to -shared-speed when given, else to the fraction sharing's pair
// table (Gavel's measurements, -pair-table DIR holding throughputs.csv and
// colocated.csv, on -pair-gpu) gives its -model beside the neighbours'.
//
//	lachesis-synth -fake-gpu-dir D -model ResNet-18/bs64 -pair-table data/gavel
//
// With -device-time its steps follow the model in wall time rather than
// its loaders' CPU work, so what it reports (its rate, its fake GPU's
// utilisation) is the model's whatever else the host's CPUs run: the
// sharing tests' jobs, whose slowdown must be the pair table's alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/profiler/synth"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "lachesis-synth:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	var cfg synth.Config
	var seconds float64
	var dataMB int64
	fs := flag.NewFlagSet("lachesis-synth", flag.ContinueOnError)
	fs.Float64Var(&cfg.Knee, "knee", 2, "cores of loader work that saturate the GPU step")
	fs.IntVar(&cfg.Workers, "workers", 0, "loader workers (0: ⌈knee⌉)")
	fs.DurationVar(&cfg.Spin, "spin", synth.DefaultSpin, "CPU time spent per sample")
	fs.IntVar(&cfg.Batch, "batch", synth.DefaultBatch, "samples per GPU step")
	fs.IntVar(&cfg.SampleBytes, "sample-bytes", synth.DefaultSampleBytes, "dataset bytes read per sample")
	fs.StringVar(&cfg.DataPath, "data", "", "dataset file, created if missing (default: under $TMPDIR)")
	fs.Int64Var(&dataMB, "data-mb", synth.DefaultDataBytes>>20, "size in MiB of a dataset file created by -data")
	fs.Float64Var(&seconds, "seconds", 30, "stop after this many seconds (0: no limit)")
	fs.IntVar(&cfg.Steps, "steps", 0, "stop after this many steps (0: no limit), counting those of -checkpoint")
	fs.BoolVar(&cfg.IOWait, "io-wait", false, "loaders wait -spin per sample (slow storage) instead of computing: an input-bound job that leaves its GPU idle without busy CPUs")
	fs.BoolVar(&cfg.DeviceTime, "device-time", false, "steps follow the model in wall time (min(workers, knee) cores of loaders, the GPU step, the fake GPU's speed beside its neighbours), not the loaders' CPU work: a rate and utilisation that a loaded host neither slows nor hides (the sharing tests)")
	fs.StringVar(&cfg.Checkpoint, "checkpoint", "", "file of the steps done so far: resume from it and keep it current (a requeued job goes on)")
	fs.DurationVar(&cfg.Report, "report", synth.DefaultReport, "interval between throughput lines")
	fs.StringVar(&cfg.FakeGPU.Dir, "fake-gpu-dir", "", "the node agent's fake GPU directory (test/demo only): run on the fake GPUs of CUDA_VISIBLE_DEVICES")
	fs.Float64Var(&cfg.FakeGPU.MemMB, "fake-gpu-mem-mb", 1024, "GPU memory the job holds on its fake GPUs, MiB")
	fs.StringVar(&cfg.FakeGPU.MemFile, "fake-gpu-mem-file", "", "while this file exists, the GPU memory (MiB) it holds replaces -fake-gpu-mem-mb, re-read every second: a job whose memory grows")
	fs.Float64Var(&cfg.FakeGPU.SharedSpeed, "shared-speed", 0, "speed relative to alone while another process shares a fake GPU (0..1; 0: from -pair-table, else 1)")
	fs.StringVar(&cfg.FakeGPU.Model, "model", "", "the job's model key, in its fake GPU record and looked up in -pair-table (e.g. ResNet-18/bs64)")
	var pairDir, pairGPU string
	fs.StringVar(&pairDir, "pair-table", "", "directory of Gavel's throughputs.csv and colocated.csv: the speed beside a neighbour comes from its model's pair")
	fs.StringVar(&pairGPU, "pair-gpu", "v100", "GPU type of -pair-table's figures (k80, p100, v100)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.DataBytes = dataMB << 20
	if pairDir != "" {
		t, err := readPairs(pairDir, pairGPU)
		if err != nil {
			return err
		}
		cfg.FakeGPU.Pairs = t
	}
	if cfg.FakeGPU.Dir != "" {
		gpus, err := synth.ParseVisibleDevices(os.Getenv("CUDA_VISIBLE_DEVICES"))
		if err != nil {
			return err
		}
		cfg.FakeGPU.GPUs = gpus
	}
	cfg.Duration = time.Duration(seconds * float64(time.Second))
	// SIGTERM is how the profiler ends a sweep point: stop cleanly, exit 0.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return synth.Run(ctx, cfg)
}

// readPairs seeds a pair table from Gavel's two files in dir.
func readPairs(dir, gpu string) (*sharing.Table, error) {
	solo, err := os.Open(filepath.Join(dir, "throughputs.csv"))
	if err != nil {
		return nil, err
	}
	defer solo.Close()
	col, err := os.Open(filepath.Join(dir, "colocated.csv"))
	if err != nil {
		return nil, err
	}
	defer col.Close()
	return sharing.ReadGavel(solo, col, gpu, sharing.DefaultLimits())
}
