// Command lachesis-ctldbench compares slurmctld under priority/tiresias and
// priority/multifactor on the same queue, and sbatch throughput with and
// without job_submit/synergy (make bench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/ctldbench"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

func main() {
	jobs := flag.Int("jobs", 2000, "pending jobs in the queue")
	window := flag.Duration("window", 60*time.Second, "measurement window per setup")
	dir := flag.String("dir", "/tmp/lachesis-bench", "cluster directory")
	pass := flag.Int("pass-interval", 5, "Lachesis pass interval, seconds")
	only := flag.String("only", "", "comma-separated setup labels to run (default: all); ratios are to the first")
	also := flag.String("also-job-submit", "", "also run multifactor with this job_submit plugin from the build tree's plugins (e.g. an older build of synergy, to compare in one run)")
	rounds := flag.Int("rounds", 1, "run the setups this many times, interleaved, and report each ratio's median and range (sbatch throughput is noisy)")
	plugins := flag.String("plugins", "", "directory of the Lachesis plugins (default: the build tree's, e.g. build/slurm-22.05/plugins), e.g. a saved copy to compare builds")
	subRounds := flag.Int("submit-rounds", 10, "sbatch throughput, synergy vs plain: interleaved batch pairs (0: skip)")
	subBatch := flag.Int("submit-batch", 300, "sbatch throughput: submissions per batch")
	subOnly := flag.Bool("submit-only", false, "only the sbatch throughput comparison")
	subSized := flag.Bool("submit-plain-sized", false, "sbatch throughput control: the plain cluster's GPU jobs ask for the CPUs and memory per GPU that synergy would give them")
	flag.Parse()
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fragment, err := os.ReadFile(filepath.Join(root, "etc", "slurm.conf.lachesis"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	yaml := fmt.Sprintf("pass_interval: %d\ndb_path: %s\n", *pass, filepath.Join(*dir, "lachesis", "lachesis.db"))
	// The middle setup separates the priority plugin's own cost from the
	// cost of preemption: with preemption on, Slurm's scheduler also asks,
	// for each waiting job, which running jobs it could requeue.
	setups := []ctldbench.Setup{
		{Label: "multifactor", Priority: "priority/multifactor", Preempt: "preempt/none"},
		{Label: "tiresias-nopreempt", Priority: "priority/tiresias", Preempt: "preempt/none",
			Extra: string(fragment) + "PreemptType=preempt/none\nPreemptMode=OFF\n", YAML: yaml},
		{Label: "tiresias", Priority: "priority/tiresias", Preempt: "preempt/tiresias", Extra: string(fragment), YAML: yaml},
		// job_submit/synergy alone on multifactor: its cost to sbatch is
		// measured on its own below (submitThroughput), more precisely.
		{Label: "multifactor+synergy", Priority: "priority/multifactor", Preempt: "preempt/none",
			JobSubmit: "synergy", YAML: yaml},
	}
	o := ctldbench.Options{Root: root, Dir: *dir, PortBase: 19817, Jobs: *jobs, Window: *window, Workers: 4, PluginDir: *plugins}
	if *subOnly {
		if *subRounds <= 0 {
			fmt.Fprintln(os.Stderr, "-submit-only needs -submit-rounds > 0")
			os.Exit(2)
		}
		submitThroughput(o, setups[0], setups[len(setups)-1], *subRounds, *subBatch, *subSized)
		return
	}
	plain, synergy := setups[0], setups[len(setups)-1]
	setups = ctldbench.SelectSetups(setups, *only)
	if *also != "" {
		setups = append(setups, ctldbench.Setup{Label: "multifactor+" + *also, Priority: "priority/multifactor", Preempt: "preempt/none",
			JobSubmit: *also, YAML: yaml})
	}
	if len(setups) == 0 {
		fmt.Fprintln(os.Stderr, "-only matches no setup")
		os.Exit(2)
	}
	// ratios[label] holds one sbatch-throughput ratio per round; the setups
	// of a round run back to back, so slow phases of a shared machine hit
	// the baseline and the others alike.
	ratios := map[string][]float64{}
	for round := 1; round <= *rounds; round++ {
		var res []ctldbench.Result
		for _, s := range setups {
			os.RemoveAll(filepath.Join(*dir, "lachesis"))
			fmt.Printf("== round %d, %s: submitting %d jobs, then watching slurmctld for %v\n", round, s.Label, *jobs, *window)
			r, err := ctldbench.Run(context.Background(), o, s)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", s.Label, err)
				os.Exit(1)
			}
			res = append(res, r)
		}
		base := res[0]
		fmt.Printf("\n%-28s %10s %14s %8s %10s %10s\n", "setup", "sbatch/s", "ctld CPU s", "passes", "pass p50", "pass max")
		for _, r := range res {
			fmt.Printf("%-28s %10.1f %14.2f %8d %10v %10v\n", r.Label, r.SubmitRate(), r.CPUSeconds, len(r.Passes),
				ctldbench.Percentile(r.Passes, 0.5), ctldbench.Percentile(r.Passes, 1))
		}
		fmt.Printf("\nRatios to %s (%d queued jobs, %v window; \"tiresias\" is the cost with preemption on):\n", base.Label, *jobs, *window)
		for _, r := range res[1:] {
			ratio := r.SubmitRate() / base.SubmitRate()
			ratios[r.Label] = append(ratios[r.Label], ratio)
			fmt.Printf("  %-28s slurmctld CPU %.2fx, sbatch throughput %.2fx\n", r.Label,
				r.CPUSeconds/max(base.CPUSeconds, 0.01), ratio)
		}
	}
	if *rounds > 1 {
		fmt.Printf("\nsbatch throughput over %d rounds (ratio to %s): median [min, max]\n", *rounds, setups[0].Label)
		for _, s := range setups[1:] {
			r := ratios[s.Label]
			sort.Float64s(r)
			fmt.Printf("  %-28s %.3fx [%.3f, %.3f]  all: %.3f\n", s.Label, r[len(r)/2], r[0], r[len(r)-1], r)
		}
	}
	fmt.Println("(priority/multifactor recomputes priorities in a decay thread only with slurmdbd; without it, as here, it has no periodic pass to time.)")
	if *subRounds > 0 {
		submitThroughput(o, plain, synergy, *subRounds, *subBatch, *subSized)
	}
}

// submitThroughput prints the sbatch throughput ratio of job_submit/synergy
// to plain Slurm, measured on two clusters side by side.
func submitThroughput(o ctldbench.Options, plain, synergy ctldbench.Setup, rounds, batch int, plainSized bool) {
	if plainSized {
		plain.Label += " (GPU jobs asking for synergy's sizes)"
	}
	fmt.Printf("\n== sbatch throughput, %s vs %s: %d rounds of %d mixed submissions each (6 in 10 ask for GPUs), %d at a time\n",
		synergy.Label, plain.Label, rounds, batch, o.Workers)
	t, err := ctldbench.SubmitThroughput(context.Background(), ctldbench.ThroughputOptions{
		Root: o.Root, Dir: filepath.Join(o.Dir, "throughput"), PortBase: o.PortBase + 20, PluginDir: o.PluginDir,
		Rounds: rounds, Batch: batch, Workers: o.Workers, PlainSized: plainSized, Progress: os.Stdout,
	}, plain, synergy)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbatch throughput: %v\n", err)
		os.Exit(1)
	}
	r := append([]float64(nil), t.Ratios...)
	sort.Float64s(r)
	fmt.Printf("sbatch throughput ratio (synergy/plain): %.3fx median of %d rounds [min %.3f, max %.3f]\n",
		ctldbench.Median(r), len(r), r[0], r[len(r)-1])
	fmt.Printf("  slurmctld CPU per submission, median: plain %.0f µs, synergy %.0f µs\n",
		ctldbench.Median(t.PlainCPUus), ctldbench.Median(t.PluginCPUus))
	d := append([]float64(nil), t.CPUDiffus...)
	sort.Float64s(d)
	fmt.Printf("  slurmctld CPU per submission, synergy - plain in the same round: median %+.0f µs [min %+.0f, max %+.0f]\n",
		ctldbench.Median(d), d[0], d[len(d)-1])
	fmt.Println("  (method: both clusters up at once; each round submits one batch to each, ABBA order; ratio per round = synergy sbatch/s / plain sbatch/s; the median is robust to the shared machine's bursts)")
}
