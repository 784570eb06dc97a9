// Command lachesis-ctldbench compares slurmctld under priority/tiresias and
// priority/multifactor on the same queue (make bench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	also := flag.String("also-job-submit", "", "also run multifactor with this job_submit plugin from build/plugins (e.g. an older build of synergy, to compare in one run)")
	rounds := flag.Int("rounds", 1, "run the setups this many times, interleaved, and report each ratio's median and range (sbatch throughput is noisy)")
	plugins := flag.String("plugins", "", "directory of the Lachesis plugins (default build/plugins), e.g. a saved copy to compare builds")
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
		// job_submit/synergy alone on multifactor: what sizing costs sbatch.
		{Label: "multifactor+synergy", Priority: "priority/multifactor", Preempt: "preempt/none",
			JobSubmit: "synergy", YAML: yaml},
	}
	setups = selectSetups(setups, *only)
	if *also != "" {
		setups = append(setups, ctldbench.Setup{Label: "multifactor+" + *also, Priority: "priority/multifactor", Preempt: "preempt/none",
			JobSubmit: *also, YAML: yaml})
	}
	if len(setups) == 0 {
		fmt.Fprintln(os.Stderr, "-only matches no setup")
		os.Exit(2)
	}
	o := ctldbench.Options{Root: root, Dir: *dir, PortBase: 19817, Jobs: *jobs, Window: *window, Workers: 4, PluginDir: *plugins}
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
}

// selectSetups keeps the setups named in a comma-separated list, in their
// original order; an empty list keeps all.
func selectSetups(all []ctldbench.Setup, only string) []ctldbench.Setup {
	if only == "" {
		return all
	}
	want := map[string]bool{}
	for _, l := range strings.Split(only, ",") {
		want[strings.TrimSpace(l)] = true
	}
	var out []ctldbench.Setup
	for _, s := range all {
		if want[s.Label] {
			out = append(out, s)
		}
	}
	return out
}
