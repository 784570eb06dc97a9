package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim"
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
	table, err := readProfiles(profiles)
	if err != nil {
		return err
	}
	if err := checkModels(table); err != nil {
		return err
	}

	base := sim.DefaultConfig()
	base.Shape = shape
	if base.FallbackAfter, err = parseSeconds(fallbackAfter); err != nil {
		return fmt.Errorf("-fallback-after: %w", err)
	}
	base.Profiles = table
	base.Models = sim.ModelsAsGiven
	var variants []sim.Variant
	for _, p := range splitList(policies) {
		c := base
		c.Policy, c.Alloc = p, sim.AllocProportional
		variants = append(variants, sim.Variant{Label: p + "/proportional", Config: c})
		c.Alloc = sim.AllocStart
		variants = append(variants, sim.Variant{Label: p + "/start", Config: c})
		for _, r := range reserveList {
			c := base
			c.Policy, c.Alloc, c.Reserve = p, sim.AllocSynergy, r
			variants = append(variants, sim.Variant{Label: synergyLabel(p, r), Config: c})
		}
	}

	var rows []replayRow
	for _, rate := range rateList {
		for _, seed := range seedList {
			w.JobsPerHour, w.Seed = rate, seed
			results, tr, err := sim.ReplaySynergy(w, sim.SynergyWindow, variants, parallel)
			if err != nil {
				return fmt.Errorf("%g jobs/h, seed %d: %w", rate, seed, err)
			}
			byLabel := map[string]*sim.Result{}
			for i, r := range results {
				byLabel[variants[i].Label] = r
			}
			for _, p := range splitList(policies) {
				prop, _ := sim.WindowAvgJCT(byLabel[p+"/proportional"], sim.SynergyWindow)
				start, _ := sim.WindowAvgJCT(byLabel[p+"/start"], sim.SynergyWindow)
				startSpeed := byLabel[p+"/start"].Summary.AvgSpeed
				for _, res := range reserveList {
					r := byLabel[synergyLabel(p, res)]
					sized, n := sim.WindowAvgJCT(r, sim.SynergyWindow)
					rows = append(rows, replayRow{rate: rate, seed: seed, jobs: len(tr.Jobs), load: offeredLoad(tr, shape), policy: p, reserve: res,
						windowJobs: n, propJCT: prop, sizedJCT: sized, speed: r.Summary.AvgSpeed, startJCT: start, startSpeed: startSpeed})
				}
			}
			fmt.Fprintf(os.Stderr, "%g jobs/h, seed %d: %d jobs simulated\n", rate, seed, len(tr.Jobs))
		}
	}
	if err := writeReplayMarkdown(os.Stdout, shape, rows); err != nil {
		return err
	}
	if out == "" {
		return nil
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer, sim.Shape, []replayRow) error{
		"summary.md": writeReplayMarkdown, "summary.csv": writeReplayCSV,
	} {
		if err := writeFile(filepath.Join(out, name), func(w io.Writer) error { return write(w, shape, rows) }); err != nil {
			return err
		}
		fmt.Println("wrote", filepath.Join(out, name))
	}
	return nil
}

// replayRow is one (list, policy, reserve) of a synergy-replay.
type replayRow struct {
	rate              float64
	seed              uint64
	jobs, windowJobs  int
	load              float64
	policy            string
	reserve           float64
	propJCT, sizedJCT float64
	speed             float64
	// startJCT and startSpeed: the start-time sizing slurmctld runs
	// (sim.AllocStart), the same for every reserve.
	startJCT, startSpeed float64
}

// offeredLoad is the GPU work a list brings per unit of time over the
// cluster's GPUs, at the proportional share: above 1, queues grow without
// bound while jobs keep arriving.
func offeredLoad(t *sim.Trace, shape sim.Shape) float64 {
	return t.GPUSeconds() / t.Span() / float64(shape.GPUs())
}

func synergyLabel(policy string, reserve float64) string {
	return fmt.Sprintf("%s/synergy-reserve%g", policy, reserve)
}

func writeReplayMarkdown(w io.Writer, shape sim.Shape, rows []replayRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Synergy-style job lists on %s; average JCT of jobs %d–%d\n\n",
		shape, sim.SynergyWindow.From, sim.SynergyWindow.To-1)
	fmt.Fprintln(bw, "| jobs/h | seed | jobs simulated | offered load | policy | reserve | proportional avg JCT (h) | Synergy avg JCT (h) | proportional / Synergy | avg speed (Synergy) | start-time avg JCT (h) | proportional / start-time | avg speed (start-time) |")
	fmt.Fprintln(bw, "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(bw, "| %g | %d | %d | %.2f | %s | %g | %.1f | %.1f | **%.2f** | %.2f | %.1f | **%.2f** | %.2f |\n",
			r.rate, r.seed, r.jobs, r.load, r.policy, r.reserve, r.propJCT/3600, r.sizedJCT/3600, r.propJCT/r.sizedJCT, r.speed,
			r.startJCT/3600, r.propJCT/r.startJCT, r.startSpeed)
	}
	return bw.Flush()
}

func writeReplayCSV(w io.Writer, _ sim.Shape, rows []replayRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "jobs_per_hour,seed,jobs_simulated,offered_load,window_jobs,policy,reserve,proportional_avg_jct_s,synergy_avg_jct_s,ratio,synergy_avg_speed,start_avg_jct_s,start_ratio,start_avg_speed")
	for _, r := range rows {
		fmt.Fprintf(bw, "%g,%d,%d,%.4f,%d,%s,%g,%.1f,%.1f,%.4f,%.4f,%.1f,%.4f,%.4f\n",
			r.rate, r.seed, r.jobs, r.load, r.windowJobs, r.policy, r.reserve, r.propJCT, r.sizedJCT, r.propJCT/r.sizedJCT, r.speed,
			r.startJCT, r.propJCT/r.startJCT, r.startSpeed)
	}
	return bw.Flush()
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readProfiles(path string) (sensitivity.Profiles, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := sensitivity.ReadThroughputCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// checkModels refuses a throughput table that lacks a workload model: its
// jobs would silently run unprofiled.
func checkModels(table sensitivity.Profiles) error {
	for _, class := range trace.SynergyTaskModels {
		for _, m := range class.Models {
			if table[m] == nil {
				return fmt.Errorf("throughput table has no model %q of the Synergy workload", m)
			}
		}
	}
	return nil
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
