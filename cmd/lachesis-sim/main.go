// Command lachesis-sim replays a job trace on a simulated GPU cluster under
// several scheduling policies side by side: what Lachesis (Tiresias
// priorities, Synergy allocation) would have done, next to FIFO, Slurm's
// age priority and a clairvoyant SRTF. See package sim for the model and
// docs/evaluation for the commands behind the published figures.
//
// Two subcommands work on Synergy's synthetic workload instead of a trace:
// `lachesis-sim synergy-jobs` writes one job list, and `lachesis-sim
// synergy-replay` replays lists at several rates and seeds with
// proportional and Synergy allocation, measured as the Synergy simulator
// measures (jobs 4000–4999).
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/progressbar"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim"
	"github.com/lachesis-sched/lachesis/sim/report"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		slog.Error("lachesis-sim failed", "err", err)
		os.Exit(1)
	}
}

// options are the parsed flags.
type options struct {
	trace, format, sacctFold, from, to, vcs string
	skip, limit                             int
	durationScale                           float64
	shape                                   sim.Shape
	policies, allocs                        string
	restartPenalty, passInterval            string
	fallbackAfter                           string
	requeueHold, minRun                     string
	partialNodeIdle, promotedPreempts       bool
	spreadVictims                           bool
	siblingWindow                           string
	maxPerJob, queueGap                     int
	tickPassesOnly                          bool
	thresholds, thresholdQuantiles          string
	promoteKnob                             float64
	gittinsLearn                            int
	referencePreemption                     bool
	ageWeight, sizeWeight                   float64
	maxAge                                  string
	profiles, models                        string
	tolerance, reserve                      float64
	seed                                    uint64
	out, title                              string
	jobsCSV, sweep, bench, progress         bool
	sweepNodes                              string
	parallel                                int
	hetero                                  heteroOptions
	fairShare, fairShareHalfLife            string
	fairShareShares                         string
	accounts                                bool
	share                                   shareOptions
}

func parseFlags(args []string) (*options, error) {
	o := &options{shape: sim.DefaultShape()}
	fs := flag.NewFlagSet("lachesis-sim", flag.ContinueOnError)
	fs.StringVar(&o.trace, "trace", "data/philly/philly_jobs.csv", "trace file")
	fs.StringVar(&o.format, "format", "auto", "trace format: auto, philly, tiresias, joblist, sacct")
	fs.StringVar(&o.sacctFold, "sacct-fold", "last", "duration of a requeued job from sacct: last run (last) or all runs (sum)")
	fs.StringVar(&o.from, "from", "", "keep jobs submitted at or after this time (2017-10-02, 2017-10-02 08:00:00, RFC 3339, or seconds since the trace's start)")
	fs.StringVar(&o.to, "to", "", "keep jobs submitted before this time (same forms as -from)")
	fs.StringVar(&o.vcs, "vc", "", "keep jobs of these virtual clusters (comma-separated)")
	fs.IntVar(&o.skip, "skip", 0, "drop the first N selected jobs")
	fs.IntVar(&o.limit, "jobs", 0, "keep at most N jobs (0: all)")
	fs.Float64Var(&o.durationScale, "duration-scale", 1, "multiply every duration")
	fs.IntVar(&o.shape.Nodes, "nodes", o.shape.Nodes, "nodes")
	fs.IntVar(&o.shape.GPUsPerNode, "gpus-per-node", o.shape.GPUsPerNode, "GPUs per node")
	fs.IntVar(&o.shape.CPUsPerNode, "cpus-per-node", o.shape.CPUsPerNode, "CPUs per node")
	fs.Float64Var(&o.shape.MemGBNode, "mem-per-node", o.shape.MemGBNode, "memory per node, GB")
	fs.BoolVar(&o.shape.GPUCountOnly, "gpu-count-only", false, "count GPUs only: no nodes, CPUs or memory")
	fs.StringVar(&o.policies, "policies", "all", "policies to compare: all, or a list of "+strings.Join(sim.PolicyNames, ","))
	fs.StringVar(&o.allocs, "alloc", "proportional", "CPU/memory allocation, one or several comma-separated: proportional (per GPU), synergy (sized at sbatch) or start (sized at sbatch and again when a job can start)")
	fs.StringVar(&o.fallbackAfter, "fallback-after", synergy.DefaultFallbackAfter.String(),
		"start allocation: how long a job held back by its request waits for it before it is lowered (synergy.fallback_after)")
	fs.StringVar(&o.restartPenalty, "restart-penalty", "60s", "time a preempted job loses when it restarts: checkpoint reload (0: the papers' assumption)")
	fs.StringVar(&o.requeueHold, "requeue-hold", "121s", "time a preempted job is held before it may start again: Slurm's cred_expire+1 (0: the papers')")
	fs.BoolVar(&o.partialNodeIdle, "partial-node-idle", true, "GPUs a preemption frees that the preemptor does not use stay idle until the next pass, as in Slurm")
	fs.StringVar(&o.minRun, "min-run", "", "las/gittins: shortest run that may be preempted (default: priority.DefaultConfig's)")
	fs.IntVar(&o.maxPerJob, "max-preemptions", -1, "las/gittins: requeues after which a job is not preempted again, 0 no limit (default: priority.DefaultConfig's)")
	fs.IntVar(&o.queueGap, "queue-gap", 0, "las/gittins: queues a victim must sit below its preemptor (default: priority.DefaultConfig's)")
	fs.BoolVar(&o.promotedPreempts, "promoted-preempts", false, "las/gittins: a job promoted for starvation may preempt")
	fs.StringVar(&o.siblingWindow, "sibling-window", "", "gittins: jobs of one virtual cluster and width submitted this far apart (seconds or a duration) form a sweep whose completed members set the others' index; 0 off (default: priority.DefaultConfig's)")
	fs.BoolVar(&o.spreadVictims, "spread-victims", priority.DefaultPreemption().SpreadVictims, "las/gittins: victims requeued more often than the least-requeued running job of their queue go last")
	fs.StringVar(&o.passInterval, "pass-interval", "30s", "policy pass interval; 0 acts on demotions at the exact second")
	fs.BoolVar(&o.tickPassesOnly, "tick-passes-only", false, "act on arrivals and completions only at pass ticks too")
	fs.StringVar(&o.thresholds, "thresholds", "", "Tiresias queue thresholds, GPU-seconds (default: priority.DefaultConfig's)")
	fs.StringVar(&o.thresholdQuantiles, "threshold-quantiles", "", "Tiresias queue thresholds at these quantiles of completed jobs' GPU-time (seed distribution, learned with -gittins-learn); overrides -thresholds")
	fs.Float64Var(&o.promoteKnob, "promote-knob", -1, "Tiresias starvation promote knob, 0 off (default: priority.DefaultConfig's)")
	fs.IntVar(&o.gittinsLearn, "gittins-learn", 0, "rebuild the Gittins distribution (and quantile thresholds) from completed jobs every N completions (0: bundled seed only)")
	fs.BoolVar(&o.referencePreemption, "reference-preemption", false, "las/gittins preempt every lower-ranked job, as the Tiresias reference simulator")
	fs.Float64Var(&o.ageWeight, "age-weight", 1000, "age policy: PriorityWeightAge")
	fs.Float64Var(&o.sizeWeight, "size-weight", 0, "age policy: PriorityWeightJobSize, favouring small jobs")
	fs.StringVar(&o.maxAge, "max-age", "7d", "age policy: PriorityMaxAge")
	fs.StringVar(&o.profiles, "profiles", "data/synergy/synergy_model_throughput.csv", "Synergy throughput table")
	fs.StringVar(&o.models, "models", "assign", "models of jobs that name none: assign (seeded draw) or given (unprofiled)")
	fs.Float64Var(&o.tolerance, "tolerance", sensitivity.DefaultTolerance, "best-case tolerance")
	fs.Float64Var(&o.reserve, "reserve", sensitivity.DefaultReserve, "share of the proportional share kept for a node's other free GPUs")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the model assignment")
	fs.StringVar(&o.out, "out", "", "directory for summary.csv/.json/.md, jct_cdf.png (and sweep.csv/.md with -sweep)")
	fs.StringVar(&o.title, "title", "", "plot title (default: the trace and cluster)")
	fs.BoolVar(&o.jobsCSV, "jobs-csv", false, "also write every job's outcome to jobs.csv")
	fs.BoolVar(&o.sweep, "sweep", false, "run the Tiresias sensitivity sweep instead of a comparison")
	fs.StringVar(&o.sweepNodes, "sweep-nodes", "", "with -sweep: node counts to sweep on, e.g. 64,48 (default: -nodes)")
	fs.BoolVar(&o.bench, "bench", false, "report wall time, jobs simulated per second and peak memory")
	fs.BoolVar(&o.progress, "progress", false, "show a progress bar even when stderr is not a terminal")
	fs.IntVar(&o.parallel, "parallel", runtime.GOMAXPROCS(0), "simulations run at once")
	fs.StringVar(&o.fairShare, "fairshare", "off", "las/gittins: fair share between accounts (a job's account is its virtual cluster, equal shares): off, on, or both (each las/gittins run also with fair share, labelled +fs)")
	fs.StringVar(&o.fairShareHalfLife, "fairshare-half-life", "7d", "fair share: usage decay half-life")
	fs.StringVar(&o.fairShareShares, "fairshare-shares", "", "fair share: shares per account, e.g. 6c71a0=3,11cb48=1 (accounts not named get 1, as lachesis.yaml's default_shares)")
	fs.BoolVar(&o.accounts, "accounts", false, "also print each account's share of GPU time and average JCT (on with -fairshare on or both)")
	o.hetero.flags(fs)
	o.share.flags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return o, nil
}

func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "synergy-jobs":
			return runSynergyJobs(args[1:])
		case "synergy-replay":
			return runSynergyReplay(args[1:])
		case "quota":
			return runQuota(args[1:])
		}
	}
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	tr, err := loadTrace(o)
	if err != nil {
		return err
	}
	cfg, err := baseConfig(o)
	if err != nil {
		return err
	}
	fmt.Printf("trace %s: %d jobs, %.0f GPU-hours, submitted over %s; cluster %s\n",
		tr.Name, len(tr.Jobs), tr.GPUSeconds()/3600, report.HumanDuration(tr.Span()), cfg.Shape)

	var variants []sim.Variant
	if !o.sweep {
		policies := sim.PolicyNames
		if o.policies != "all" {
			policies = splitList(o.policies)
		}
		var allocs []sim.AllocMode
		for _, a := range splitList(o.allocs) {
			allocs = append(allocs, sim.AllocMode(a))
		}
		variants = sim.Variants(cfg, policies, allocs)
		if o.fairShare == "both" {
			variants = sim.FairShareVariants(variants)
		}
		if variants, err = o.hetero.variants(variants); err != nil {
			return err
		}
		if variants, err = o.share.variants(variants, o.hetero.table, tr, o.seed); err != nil {
			return err
		}
	}
	runs := len(variants)
	settings, err := sweepSettings(o, cfg)
	if err != nil {
		return err
	}
	if o.sweep {
		runs = sim.NumSweepRuns() * len(settings)
	}
	var bar *progressbar.Counter
	if o.progress || progressbar.IsTerminal(os.Stderr) {
		bar = progressbar.NewCounter(os.Stderr, "simulating", "jobs", runs*len(tr.Jobs))
		for i := range variants {
			variants[i].Config.Progress = bar.Add
		}
		for i := range settings {
			settings[i].Config.Progress = bar.Add
		}
	}

	start := time.Now()
	if o.sweep {
		err = runSweep(o, tr, settings)
	} else {
		err = runComparison(o, tr, variants)
	}
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	if o.bench {
		printBench(time.Since(start), runs, len(tr.Jobs), o.parallel)
	}
	return nil
}

func runComparison(o *options, tr *sim.Trace, variants []sim.Variant) error {
	results, err := sim.RunAll(tr, variants, o.parallel)
	if err != nil {
		return err
	}
	if err := report.WriteTable(os.Stdout, results); err != nil {
		return err
	}
	for _, r := range report.Ratios(results) {
		fmt.Printf("%s: %.3f\n", r.Name, r.Value)
	}
	if o.accounts || o.fairShare != "off" {
		fmt.Println("\nper account (virtual cluster): share of all GPU time; per run, share of the GPU time held while jobs waited, and average JCT")
		if err := report.WriteAccountTable(os.Stdout, results); err != nil {
			return err
		}
	}
	if err := writeHetero(o, results); err != nil {
		return err
	}
	if err := writeSharing(results); err != nil {
		return err
	}
	if o.out == "" {
		return nil
	}
	title := o.title
	if title == "" {
		title = fmt.Sprintf("JCT CDF: %s, %d jobs, %d GPUs", tr.Name, len(tr.Jobs), variants[0].Config.Shape.GPUs())
	}
	paths, err := report.WriteOutputs(o.out, results, o.seed, title, o.jobsCSV)
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	return err
}

// sweepSettings are the clusters of a sweep: the configured one, or one per
// -sweep-nodes entry.
func sweepSettings(o *options, cfg sim.Config) ([]sim.SweepSetting, error) {
	counts := []string{strconv.Itoa(cfg.Shape.Nodes)}
	if o.sweepNodes != "" {
		counts = splitList(o.sweepNodes)
	}
	var nodes []int
	for _, s := range counts {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-sweep-nodes: %q is not a node count", s)
		}
		nodes = append(nodes, n)
	}
	return sim.SweepSettingsOn(cfg, nodes), nil
}

func runSweep(o *options, tr *sim.Trace, settings []sim.SweepSetting) error {
	rows, err := sim.Sweep(tr, settings, o.parallel)
	if err != nil {
		return err
	}
	if err := report.WriteSweepMarkdown(os.Stdout, settings, rows); err != nil {
		return err
	}
	best, _ := sim.Chosen(rows)
	fmt.Printf("\nchosen default: %s (regret %.3f, %d preemptions)\n", best.Point, best.Regret, best.Preemptions())
	if o.out == "" {
		return nil
	}
	paths, err := report.WriteSweepOutputs(o.out, settings, rows)
	for _, p := range paths {
		fmt.Println("wrote", p)
	}
	return err
}

func printBench(elapsed time.Duration, runs, jobs, parallel int) {
	total := runs * jobs
	fmt.Printf("bench: %d simulation(s) × %d jobs in %.2f s wall (%d at a time): %.0f jobs simulated per second\n",
		runs, jobs, elapsed.Seconds(), parallel, float64(total)/elapsed.Seconds())
	if rss, err := sim.PeakRSS(); err == nil {
		fmt.Printf("bench: peak RSS %.1f MiB\n", float64(rss)/(1<<20))
	} else {
		fmt.Println("bench:", err)
	}
}

func loadTrace(o *options) (*sim.Trace, error) {
	var tr *sim.Trace
	var err error
	if trace.Format(o.format) == trace.FormatSacct {
		var st trace.SacctStats
		tr, st, err = trace.LoadSacct(o.trace, trace.SacctOptions{Fold: trace.SacctFold(o.sacctFold)})
		if err == nil {
			fmt.Printf("sacct: %d lines, %d jobs (%d requeued, folded), left out: %d steps, %d without GPUs, %d unfinished, %d never ran\n",
				st.Lines, st.Jobs, st.Requeued, st.Steps, st.NoGPU, st.Unfinished, st.NeverRan)
		}
	} else {
		tr, err = trace.Load(o.trace, trace.Format(o.format))
	}
	if err != nil {
		return nil, err
	}
	f := trace.Filter{Skip: o.skip, Limit: o.limit, DurationScale: o.durationScale}
	if o.vcs != "" {
		f.Clusters = splitList(o.vcs)
	}
	if f.From, f.FromSec, err = parseWhen(o.from); err != nil {
		return nil, fmt.Errorf("-from: %w", err)
	}
	if f.To, f.ToSec, err = parseWhen(o.to); err != nil {
		return nil, fmt.Errorf("-to: %w", err)
	}
	return tr.Select(f)
}

func baseConfig(o *options) (sim.Config, error) {
	cfg := sim.DefaultConfig()
	cfg.Shape = o.shape
	cfg.Models = sim.ModelRule(o.models)
	cfg.Tolerance, cfg.Reserve, cfg.Seed = o.tolerance, o.reserve, o.seed
	cfg.TickPassesOnly = o.tickPassesOnly
	var err error
	if cfg.FallbackAfter, err = parseSeconds(o.fallbackAfter); err != nil {
		return cfg, fmt.Errorf("-fallback-after: %w", err)
	}
	if cfg.RestartPenalty, err = parseSeconds(o.restartPenalty); err != nil {
		return cfg, fmt.Errorf("-restart-penalty: %w", err)
	}
	if cfg.PassInterval, err = parseSeconds(o.passInterval); err != nil {
		return cfg, fmt.Errorf("-pass-interval: %w", err)
	}
	if cfg.RequeueHold, err = parseSeconds(o.requeueHold); err != nil {
		return cfg, fmt.Errorf("-requeue-hold: %w", err)
	}
	cfg.PartialNodeIdle = o.partialNodeIdle
	po := &cfg.PolicyOptions
	if o.thresholds != "" {
		// A fixed list overrides the default quantiles unless both are given.
		po.Tiresias.FixThresholds(nil)
		for _, s := range splitList(o.thresholds) {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return cfg, fmt.Errorf("-thresholds: %q is not a number", s)
			}
			po.Tiresias.Thresholds = append(po.Tiresias.Thresholds, v)
		}
	}
	if o.thresholdQuantiles != "" {
		po.Tiresias.ThresholdQuantiles = nil
		for _, s := range splitList(o.thresholdQuantiles) {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return cfg, fmt.Errorf("-threshold-quantiles: %q is not a number", s)
			}
			po.Tiresias.ThresholdQuantiles = append(po.Tiresias.ThresholdQuantiles, v)
		}
	}
	if o.promoteKnob >= 0 {
		po.Tiresias.PromoteKnob = o.promoteKnob
	}
	pre := &po.Tiresias.Preemption
	if o.minRun != "" {
		if pre.MinRun, err = parseSeconds(o.minRun); err != nil {
			return cfg, fmt.Errorf("-min-run: %w", err)
		}
	}
	if o.maxPerJob >= 0 {
		pre.MaxPerJob = o.maxPerJob
	}
	if o.queueGap > 0 {
		pre.QueueGap = o.queueGap
	}
	pre.PromotedPreempts = o.promotedPreempts
	pre.SpreadVictims = o.spreadVictims
	if o.siblingWindow != "" {
		if po.Tiresias.SiblingWindow, err = parseSeconds(o.siblingWindow); err != nil {
			return cfg, fmt.Errorf("-sibling-window: %w", err)
		}
	}
	fsCfg := &po.Tiresias.FairShare
	switch o.fairShare {
	case "off", "both": // both: FairShareVariants turns it on in copies
	case "on":
		fsCfg.Enabled = true
	default:
		return cfg, fmt.Errorf("-fairshare: %q is not off, on or both", o.fairShare)
	}
	if fsCfg.HalfLife, err = parseSeconds(o.fairShareHalfLife); err != nil {
		return cfg, fmt.Errorf("-fairshare-half-life: %w", err)
	}
	if fsCfg.Shares, err = sim.ParseShares(o.fairShareShares); err != nil {
		return cfg, fmt.Errorf("-fairshare-shares: %w", err)
	}
	po.LearnEvery = o.gittinsLearn
	po.ReferencePreemption = o.referencePreemption
	po.AgeWeight, po.SizeWeight = o.ageWeight, o.sizeWeight
	if po.MaxAge, err = parseSeconds(o.maxAge); err != nil {
		return cfg, fmt.Errorf("-max-age: %w", err)
	}
	if !o.shape.GPUCountOnly && o.profiles != "" {
		if cfg.Profiles, err = sim.ReadProfiles(o.profiles); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// parseSeconds reads "90", "90s", "1h30m" or "7d" as seconds.
func parseSeconds(s string) (float64, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if v, err := strconv.ParseFloat(days, 64); err == nil {
			return v * 86400, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (90, 90s, 1h30m, 7d)", s)
	}
	return d.Seconds(), nil
}

// parseWhen reads a wall-clock time, or seconds since the trace's start.
func parseWhen(s string) (time.Time, float64, error) {
	if s == "" {
		return time.Time{}, 0, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Time{}, v, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, 0, nil
		}
	}
	return time.Time{}, 0, fmt.Errorf("%q is not a date, a time or a number of seconds", s)
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
