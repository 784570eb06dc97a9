package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/sim"
	"github.com/lachesis-sched/lachesis/sim/report"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// runSynergyJobs is `lachesis-sim synergy-jobs`: writes one Synergy-style
// job list (trace.GenerateSynergyJobs) in the plain job-list format, for
// replaying with -trace FILE -models given.
func runSynergyJobs(args []string) error {
	fs := flag.NewFlagSet("lachesis-sim synergy-jobs", flag.ContinueOnError)
	var w trace.SynergyWorkload
	var out, split string
	fs.Float64Var(&w.JobsPerHour, "rate", 9, "arrival rate, jobs per hour (Poisson)")
	fs.IntVar(&w.Jobs, "jobs", 6000, "jobs to generate")
	fs.Uint64Var(&w.Seed, "seed", 1, "seed of the draws")
	fs.StringVar(&split, "split", "20,70,10", "percent of image, language and speech jobs")
	fs.BoolVar(&w.MultiGPU, "multi-gpu", false, "draw GPU demands from the 1/2/4/8 mix instead of one GPU per job")
	fs.StringVar(&w.Draws, "draws", trace.DrawsLachesis, drawsUsage)
	fs.StringVar(&out, "o", "-", "output file (- for stdout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if w.Split, err = parseSplit(split); err != nil {
		return err
	}
	tr, err := trace.GenerateSynergyJobs(w)
	if err != nil {
		return err
	}
	var dst io.Writer = os.Stdout
	if out != "-" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		dst = f
	}
	if err := trace.WriteJobList(dst, tr); err != nil {
		return err
	}
	if f, ok := dst.(*os.File); ok && f != os.Stdout {
		return f.Close()
	}
	return nil
}

const drawsUsage = "random draws: " + trace.DrawsLachesis + " (our own stream) or " + trace.DrawsSynergy +
	" (the very lists the Synergy simulator draws for the rate and seed, single-GPU only)"

// runSynergyReplay is `lachesis-sim synergy-replay`: for every rate and
// seed, generates the job list, replays it under each policy with
// proportional and Synergy allocation, and reports the average JCT of the
// Synergy simulator's measurement window (jobs 4000–4999) and the
// proportional/Synergy ratio.
func runSynergyReplay(args []string) error {
	fs := flag.NewFlagSet("lachesis-sim synergy-replay", flag.ContinueOnError)
	shape := sim.Shape{Nodes: 16, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	var rates, seeds, policies, reserves, profiles, split, out, fallbackAfter string
	var parallel int
	var multiGPU bool
	var draws string
	fs.BoolVar(&multiGPU, "multi-gpu", false, "draw GPU demands from the 1/2/4/8 mix instead of one GPU per job")
	fs.StringVar(&draws, "draws", trace.DrawsLachesis, drawsUsage)
	fs.StringVar(&rates, "rates", "9,12", "arrival rates, jobs per hour")
	fs.StringVar(&seeds, "seeds", "1,2,3", "seeds of the job lists")
	fs.StringVar(&split, "split", "20,70,10", "percent of image, language and speech jobs")
	fs.StringVar(&policies, "policies", "fifo,fifo-skip", "policies")
	fs.StringVar(&reserves, "reserves", "1", "Synergy allocation reserves to compare (1: the default)")
	fs.StringVar(&fallbackAfter, "fallback-after", synergy.DefaultFallbackAfter.String(),
		"start-time sizing: how long a job held back by its request waits for it before it is lowered (synergy.fallback_after)")
	fs.IntVar(&shape.Nodes, "nodes", shape.Nodes, "nodes")
	fs.IntVar(&shape.GPUsPerNode, "gpus-per-node", shape.GPUsPerNode, "GPUs per node")
	fs.IntVar(&shape.CPUsPerNode, "cpus-per-node", shape.CPUsPerNode, "CPUs per node")
	fs.Float64Var(&shape.MemGBNode, "mem-per-node", shape.MemGBNode, "memory per node, GB")
	fs.StringVar(&profiles, "profiles", "data/synergy/synergy_model_throughput.csv", "Synergy throughput table")
	fs.StringVar(&out, "out", "", "directory for summary.md and summary.csv")
	fs.IntVar(&parallel, "parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	w := trace.SynergyWorkload{MultiGPU: multiGPU, Draws: draws}
	if w.Split, err = parseSplit(split); err != nil {
		return err
	}
	rateList, err := parseFloats("-rates", rates)
	if err != nil {
		return err
	}
	reserveList, err := parseFloats("-reserves", reserves)
	if err != nil {
		return err
	}
	var seedList []uint64
	for _, s := range splitList(seeds) {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("-seeds: %q is not a seed", s)
		}
		seedList = append(seedList, v)
	}
	table, err := sim.ReadProfiles(profiles)
	if err != nil {
		return err
	}
	if err := sim.CheckSynergyModels(table); err != nil {
		return err
	}
	base := sim.DefaultConfig()
	base.Shape = shape
	if base.FallbackAfter, err = parseSeconds(fallbackAfter); err != nil {
		return fmt.Errorf("-fallback-after: %w", err)
	}
	base.Profiles = table
	base.Models = sim.ModelsAsGiven
	rows, err := sim.RunSynergyReplay(sim.SynergyReplayPlan{
		Workload: w, Rates: rateList, Seeds: seedList, Policies: splitList(policies), Reserves: reserveList,
		Base: base, Parallel: parallel,
		Simulated: func(rate float64, seed uint64, jobs int) {
			fmt.Fprintf(os.Stderr, "%g jobs/h, seed %d: %d jobs simulated\n", rate, seed, jobs)
		},
	})
	if err != nil {
		return err
	}
	if err := report.WriteSynergyReplayMarkdown(os.Stdout, shape, rows); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	paths, err := report.WriteSynergyReplayOutputs(out, shape, rows)
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	return err
}

func parseSplit(s string) ([3]float64, error) {
	var out [3]float64
	parts := splitList(s)
	if len(parts) != 3 {
		return out, fmt.Errorf("-split: %q is not three percentages (image,language,speech)", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return out, fmt.Errorf("-split: %q is not a number", p)
		}
		out[i] = v
	}
	return out, nil
}

func parseFloats(flagName, s string) ([]float64, error) {
	var out []float64
	for _, p := range splitList(s) {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", flagName, p)
		}
		out = append(out, v)
	}
	return out, nil
}
