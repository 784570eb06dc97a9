package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Part is one side-by-side comparison of the demo.
type Part struct {
	Title    string
	Runner   *Runner
	Jobs     []Job
	A, B     Scenario // A: with Lachesis; B: the baseline
	Results  string   // per-job CSV
	ShowCPUs bool     // report the CPUs per GPU each job got
}

// Run runs both scenarios and prints the comparison.
func (p Part) Run(ctx context.Context, w io.Writer) error {
	fmt.Fprintf(w, "\n== %s: %d jobs on %d nodes x %d GPUs, first %s, then %s.\n",
		p.Title, len(p.Jobs), p.Runner.Nodes, p.Runner.GPUs, p.A.Label, p.B.Label)
	a, err := p.Runner.Run(ctx, p.A, p.Jobs)
	if err != nil {
		return fmt.Errorf("%s run: %w", p.A.Label, err)
	}
	fmt.Fprintf(w, "\n%s run done (average JCT %.1f s). Now %s.\n", p.A.Label, Average(a).Seconds(), p.B.Label)
	b, err := p.Runner.Run(ctx, p.B, p.Jobs)
	if err != nil {
		return fmt.Errorf("%s run: %w", p.B.Label, err)
	}
	Report(w, p.A.Label, a, p.B.Label, b, p.ShowCPUs)
	if p.Results != "" {
		if err := os.MkdirAll(filepath.Dir(p.Results), 0o755); err == nil {
			if err := WriteCSV(p.Results, p.A.Label, a, p.B.Label, b); err == nil {
				fmt.Fprintf(w, "per-job results: %s\n", p.Results)
			}
		}
	}
	return nil
}

// TiresiasScenarios: Lachesis's priorities and preemption against Slurm's
// priority/multifactor.
func TiresiasScenarios(fragment, dir string) (Scenario, Scenario) {
	lachesis := Scenario{
		Label: "tiresias", Priority: "priority/tiresias", Preempt: "preempt/tiresias",
		Extra: fragment, ShowQueues: true,
		// Thresholds scaled to a minutes-long demo: a 4-GPU job leaves
		// queue 0 after 10 s, queue 1 after 100 s. FIFO inside a queue and
		// no promotion keep the run easy to follow. min_run is scaled
		// down with them (the default, 600 s, outlasts every demo job).
		YAML: fmt.Sprintf("tiresias:\n  mode: las\n  thresholds: [40, 400]\n  promote_knob: 0\n"+
			"  preemption: {min_run: 5}\npass_interval: 1\ndb_path: %s\n",
			filepath.Join(dir, "lachesis", "lachesis.db")),
	}
	multifactor := Scenario{
		Label: "multifactor", Priority: "priority/multifactor", Preempt: "preempt/none",
		Extra: "PriorityWeightAge=1000\nPriorityWeightJobSize=0\n",
	}
	return lachesis, multifactor
}

// SynergyScenarios: CPUs and memory sized by job_submit/synergy from the
// models' profiles, against every job asking for the GPU-proportional
// share (shareCPUs, shareMemMB per GPU) as sites configure it today. Both
// run under Lachesis's priorities, so only the sizing differs.
func SynergyScenarios(fragment, dir string, models map[string]Model, shareCPUs, shareMemMB int) (Scenario, Scenario) {
	yaml := fmt.Sprintf("pass_interval: 1\nsynergy:\n  fallback_after: 10\ndb_path: %s\n",
		filepath.Join(dir, "lachesis", "lachesis.db"))
	speeds := func(j Job) string { return models[j.Model].Speeds }
	sized := Scenario{
		Label: "synergy", Priority: "priority/tiresias", Preempt: "preempt/tiresias",
		JobSubmit: "synergy", Extra: fragment, YAML: yaml, Speeds: speeds,
		SubmitArgs: func(j Job) []string { return []string{"--comment=model=" + j.Model} },
		Prepare:    func(clusterDir string) error { return seedProfiles(clusterDir, models) },
	}
	proportional := Scenario{
		Label: "proportional", Priority: "priority/tiresias", Preempt: "preempt/tiresias",
		Extra: slurmcluster.OverrideConf(fragment, "JobSubmitPlugins="), YAML: yaml, Speeds: speeds,
		SubmitArgs: func(j Job) []string {
			return []string{"--cpus-per-gpu=" + strconv.Itoa(shareCPUs), "--mem-per-gpu=" + strconv.Itoa(shareMemMB)}
		},
	}
	return sized, proportional
}

// seedProfiles stores a profile per demo model in the controller's
// database, as node agents would have after `lachesis-profiler profile`.
func seedProfiles(clusterDir string, models map[string]Model) error {
	if err := os.MkdirAll(filepath.Join(clusterDir, "lachesis"), 0o755); err != nil {
		return err
	}
	store, err := profilestore.Open(filepath.Join(clusterDir, "lachesis", "lachesis.db"))
	if err != nil {
		return err
	}
	defer store.Close()
	now := time.Now()
	for _, m := range models {
		rec := profile.Record{
			ID: "demo-" + m.Name, Model: m.Name, Node: "demo", User: "demo", GPUs: 1,
			Started: now, Finished: now, Signal: "regex",
			Best:      sensitivity.Demand{CPUsPerGPU: m.BestCPUs, MemGBPerGPU: m.BestMemGB},
			Tolerance: sensitivity.DefaultTolerance,
		}
		if _, err := store.Put(rec); err != nil {
			return err
		}
		// Published: the demo's jobs, whoever submits them, are sized by it.
		if _, err := store.Publish(rec.Model, rec.ID); err != nil {
			return err
		}
	}
	return nil
}
