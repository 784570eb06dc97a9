package replay

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim"
)

// Replayer replays job lists on one loopback cluster shape.
type Replayer struct {
	Root  string // repository root
	Dir   string // cluster directory
	Nodes int
	GPUs  int // per node
	// CPUs and MemMB per node are required: they are the simulator's
	// shape too, so the script's defaults are not taken silently.
	CPUs     int
	MemMB    int
	PortBase int // 0: scripts/cluster.sh's default
	// Compression divides every time of the trace and of the settings.
	Compression float64
	// Settings are in trace time (DefaultTraceSettings).
	Settings TraceSettings
	// RestartPenalty is the simulator's restart penalty in replay seconds.
	RestartPenalty float64
	// SchedulerTick and LaunchOverhead are the simulator's model of
	// Slurm's own latencies, in replay seconds (SimCosts).
	SchedulerTick, LaunchOverhead float64
	// BackfillInterval is the simulator's sched/backfill cycle, in
	// replay seconds (SimCosts).
	BackfillInterval float64
	Out              io.Writer
	// PollEvery is how often the harness submits due jobs and reads
	// squeue (1 s when 0).
	PollEvery time.Duration
	// Models are the sizing replays' models (etc/demo/models.csv); each
	// job trains ModelOf its id.
	Models map[string]demo.Model
}

// Shape is the simulator's view of the cluster.
func (r *Replayer) Shape() sim.Shape {
	return sim.Shape{Nodes: r.Nodes, GPUsPerNode: r.GPUs, CPUsPerNode: r.CPUs, MemGBNode: float64(r.MemMB) / 1000}
}

// accountName keeps an account name (a Philly virtual cluster) that Slurm
// takes as it is; anything else runs under the user's default account.
var accountName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Run replays the compressed trace (ScaleTrace) under policy on the
// cluster, then the same jobs through the simulator.
func (r *Replayer) Run(ctx context.Context, policy string, scaledTrace *sim.Trace) (Comparison, error) {
	if r.Nodes < 1 || r.GPUs < 1 || r.CPUs < r.GPUs || r.MemMB < 1 {
		return Comparison{}, fmt.Errorf("%w: a cluster of %d nodes x %d GPUs, %d CPUs, %d MB: every field is required, and a CPU per GPU",
			ErrReplay, r.Nodes, r.GPUs, r.CPUs, r.MemMB)
	}
	settings := r.Settings
	var scenario demo.Scenario
	switch policy {
	case Multifactor:
		scenario = demo.Scenario{Label: policy, Priority: "priority/multifactor", Preempt: "preempt/none",
			Extra: "PriorityWeightAge=1000\nPriorityWeightJobSize=0\n"}
	case LAS, Gittins:
		settings.Tiresias.Mode = priority.Mode(policy)
		fragment, err := os.ReadFile(filepath.Join(r.Root, "etc", "slurm.conf.lachesis"))
		if err != nil {
			return Comparison{}, err
		}
		scenario = demo.Scenario{Label: policy, Priority: "priority/tiresias", Preempt: "preempt/tiresias",
			Extra: slurmcluster.OverrideConf(string(fragment), "JobSubmitPlugins=")}
	case Synergy, Proportional:
		// Both sizings rank by 2D-LAS, so only the sizing differs (the
		// demo's pair of scenarios, with the replay's scaled settings).
		settings.Tiresias.Mode = priority.ModeLAS
		fragment, err := os.ReadFile(filepath.Join(r.Root, "etc", "slurm.conf.lachesis"))
		if err != nil {
			return Comparison{}, err
		}
		shareMemMB := r.MemMB / r.GPUs
		for _, m := range r.Models {
			// The simulator's profile starts at the best case's memory
			// (SimProfiles): the share must reach it.
			if m.BestMemGB > float64(r.MemMB)/1000/float64(r.GPUs) {
				return Comparison{}, fmt.Errorf("%w: model %s's best case needs %g GB per GPU, more than the share (%d MB)",
					ErrReplay, m.Name, m.BestMemGB, shareMemMB)
			}
		}
		sized, proportional := demo.SynergyScenarios(string(fragment), r.Dir, r.Models, r.CPUs/r.GPUs, shareMemMB)
		scenario = proportional
		if policy == Synergy {
			scenario = sized
		}
		scenario.Label = policy
	default:
		return Comparison{}, fmt.Errorf("%w: unknown policy %q (%v)", ErrReplay, policy, Policies)
	}
	scaled, err := Scale(settings, r.Compression)
	if err != nil {
		return Comparison{}, err
	}
	var profiles sensitivity.Profiles
	if sizing(policy) {
		if profiles, err = SimProfiles(r.Models); err != nil {
			return Comparison{}, err
		}
		if len(profiles) == 0 {
			return Comparison{}, fmt.Errorf("%w: %s needs models", ErrReplay, policy)
		}
		scaledTrace = &sim.Trace{Name: scaledTrace.Name, Start: scaledTrace.Start, Jobs: withModels(scaledTrace.Jobs, r.Models)}
	}
	if policy != Multifactor {
		scenario.YAML = scaled.YAML + fmt.Sprintf("log_level: info\ndb_path: %s\n", filepath.Join(r.Dir, "lachesis", "lachesis.db"))
	}
	accounts := map[string]string{}
	jobs := make([]demo.Job, len(scaledTrace.Jobs))
	for i, j := range scaledTrace.Jobs {
		name := strconv.FormatUint(uint64(j.ID), 10)
		jobs[i] = demo.Job{Name: name, Arrival: time.Duration(j.Submit * float64(time.Second)),
			GPUs: j.GPUs, Work: time.Duration(j.Duration) * time.Second, Model: j.Model}
		if accountName.MatchString(j.Cluster) {
			accounts[name] = j.Cluster
		}
	}
	// Jobs of one virtual cluster share an account, as the simulator
	// keys sweeps by virtual cluster and the core by user and account.
	sizingArgs := scenario.SubmitArgs
	scenario.SubmitArgs = func(j demo.Job) []string {
		var args []string
		if sizingArgs != nil {
			args = sizingArgs(j)
		}
		if a, ok := accounts[j.Name]; ok {
			args = append(args, "--account="+a)
		}
		return args
	}
	var recs map[uint32]*Record
	poll := r.PollEvery
	if poll <= 0 {
		poll = time.Second
	}
	runner := &demo.Runner{Root: r.Root, Dir: r.Dir, Nodes: r.Nodes, GPUs: r.GPUs, CPUs: r.CPUs, MemMB: r.MemMB,
		PortBase: r.PortBase, Out: r.Out, PollEvery: poll,
		Finished: func(c *slurmcluster.Cluster) error {
			var err error
			recs, err = ReadControllerLog(strings.NewReader(c.ControllerLog()), nil)
			return err
		}}
	fmt.Fprintf(r.Out, "\n== %s: %d jobs on %d nodes x %d GPUs, compression %g\n", policy, len(jobs), r.Nodes, r.GPUs, r.Compression)
	if policy != Multifactor {
		for _, n := range scaled.Notes {
			fmt.Fprintf(r.Out, "   %s\n", n)
		}
	}
	out, err := runner.Run(ctx, scenario, jobs)
	if err != nil {
		return Comparison{}, err
	}
	ids := map[uint32]uint32{}
	for i, o := range out {
		ids[scaledTrace.Jobs[i].ID] = o.ID
	}
	cluster, err := ClusterSide("cluster", scaledTrace.Jobs, ids, recs)
	if err != nil {
		return Comparison{}, err
	}
	// The log's requeues against Slurm's own count (scontrol's Restarts).
	mismatched := 0
	for i, o := range out {
		if cluster.Jobs[i].Preemptions != o.Restarts {
			mismatched++
		}
	}
	simulated, _, err := Simulate(policy, r.Shape(), scaled,
		SimCosts{RestartPenalty: r.RestartPenalty, RequeueHold: RequeueHold, PassInterval: float64(scaled.PassInterval),
			SchedulerTick: r.SchedulerTick, LaunchOverhead: r.LaunchOverhead, BackfillInterval: r.BackfillInterval,
			FallbackAfter: scaled.Config.Synergy.FallbackAfter.Seconds()}, cluster, profiles)
	if err != nil {
		return Comparison{}, err
	}
	return Comparison{Policy: policy, Cluster: cluster, Simulation: simulated, RestartsMismatched: mismatched}, nil
}
