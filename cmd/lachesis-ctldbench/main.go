// Command lachesis-ctldbench compares slurmctld under priority/tiresias and
// priority/multifactor on the same queue (make bench).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	only := flag.String("setups", "", "comma-separated labels of the setups to run (default all; the first is the base of the ratios)")
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
	if *only != "" {
		keep := map[string]bool{}
		for _, l := range strings.Split(*only, ",") {
			keep[strings.TrimSpace(l)] = true
		}
		setups = slices.DeleteFunc(setups, func(s ctldbench.Setup) bool { return !keep[s.Label] })
		if len(setups) == 0 {
			fmt.Fprintln(os.Stderr, "-setups matches no setup")
			os.Exit(2)
		}
	}
	o := ctldbench.Options{Root: root, Dir: *dir, PortBase: 19817, Jobs: *jobs, Window: *window, Workers: 4, PluginDir: *plugins}
	var res []ctldbench.Result
	for _, s := range setups {
		os.RemoveAll(filepath.Join(*dir, "lachesis"))
		fmt.Printf("== %s: submitting %d jobs, then watching slurmctld for %v\n", s.Label, *jobs, *window)
		r, err := ctldbench.Run(context.Background(), o, s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", s.Label, err)
			os.Exit(1)
		}
		res = append(res, r)
	}
	base := res[0]
	fmt.Printf("\n%-20s %10s %14s %8s %10s %10s\n", "setup", "sbatch/s", "ctld CPU s", "passes", "pass p50", "pass max")
	for _, r := range res {
		fmt.Printf("%-20s %10.1f %14.2f %8d %10v %10v\n", r.Label, r.SubmitRate(), r.CPUSeconds, len(r.Passes),
			ctldbench.Percentile(r.Passes, 0.5), ctldbench.Percentile(r.Passes, 1))
	}
	fmt.Printf("\nRatios to %s (%d queued jobs, %v window; \"tiresias\" is the cost with preemption on):\n", base.Label, *jobs, *window)
	for _, r := range res[1:] {
		fmt.Printf("  %-20s slurmctld CPU %.2fx, sbatch throughput %.2fx\n", r.Label,
			r.CPUSeconds/max(base.CPUSeconds, 0.01), r.SubmitRate()/base.SubmitRate())
	}
	fmt.Println("(priority/multifactor recomputes priorities in a decay thread only with slurmdbd; without it, as here, it has no periodic pass to time.)")
}
