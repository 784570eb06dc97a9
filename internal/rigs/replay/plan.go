package replay

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/sim"
)

// ErrReplay is wrapped by this package's errors about its inputs.
var ErrReplay = errors.New("replay")

// Policy names the replay knows: Slurm's priority/multifactor (age only,
// no preemption) and Lachesis's 2D-LAS and 2D-Gittins; and two sizings
// under 2D-LAS, job_submit/synergy sizing profiled jobs from their
// profiles (Synergy) against every job asking for its GPUs' share of the
// node's CPUs and memory (Proportional). The sizings need models
// (Replayer.Models); each job trains one of them (ModelOf), and its
// sleeper runs at the speed its allocation gives that model.
const (
	Multifactor  = "multifactor"
	LAS          = "las"
	Gittins      = "gittins"
	Synergy      = "synergy"
	Proportional = "proportional"
)

// Policies lists them in report order.
var Policies = []string{Multifactor, LAS, Gittins, Synergy, Proportional}

// sizing says whether policy is one of the two sizings.
func sizing(policy string) bool { return policy == Synergy || policy == Proportional }

// RequeueHold is how long Slurm 22.05 holds a requeued job on the loopback
// cluster: cred_expire (5, the least Slurm accepts) + 1 seconds
// (job_mgr.c, begin_time = now + cred_lifetime + 1).
const RequeueHold = 6

// GittinsMinHistory is the replay's gittins_min_history: above any slice's
// job count, so the core keeps ranking by the bundled seed distribution, as
// the simulator does (it learns only when told to). Learning from a slice
// would mix the seed's unscaled GPU-seconds with the slice's scaled ones,
// and the default (100) is reached within a 200-job slice.
const GittinsMinHistory = 1000000

// TraceSettings are the time-valued settings in trace time, before
// compression: Lachesis's priority config and pass interval, and Synergy's
// fallback_after.
type TraceSettings struct {
	Tiresias      priority.Config
	PassInterval  float64 // seconds
	FallbackAfter float64 // seconds
}

// DefaultTraceSettings are Lachesis's defaults with the queue thresholds
// fixed at the bundled distribution's quantiles (what the defaults rank by
// until the cluster has history) and fair share off: the replay submits
// every job as one user, and the simulator's default has it off.
func DefaultTraceSettings() TraceSettings {
	c := priority.DefaultConfig()
	th := make([]float64, len(c.ThresholdQuantiles))
	for i, q := range c.ThresholdQuantiles {
		th[i] = math.Round(priority.SeedDistribution().Quantile(q))
	}
	c.FixThresholds(th)
	c.FairShare = priority.DefaultFairShare()
	c.FairShare.Enabled = false
	return TraceSettings{Tiresias: c, PassInterval: sim.DefaultPassInterval, FallbackAfter: 600}
}

// Scaled is a replay's compressed settings: what slurmctld is given and the
// simulator is run with.
type Scaled struct {
	Compression float64
	// YAML is lachesis.yaml for the cluster (without db_path).
	YAML string
	// Config is YAML as slurmctld's core parses it.
	Config config.Config
	// PassInterval is the scaled pass interval, whole seconds >= 1.
	PassInterval int
	// Notes say what could not be scaled exactly.
	Notes []string
}

// Scale divides every time-valued setting of s by compression and returns
// the lachesis.yaml that says so, parsed by the controller's own parser.
func Scale(s TraceSettings, compression float64) (Scaled, error) {
	if !(compression >= 1) || math.IsInf(compression, 0) {
		return Scaled{}, fmt.Errorf("%w: compression %v must be a finite number >= 1", ErrReplay, compression)
	}
	t := s.Tiresias
	out := Scaled{Compression: compression}
	div := func(v float64) float64 { return v / compression }
	pass := int(math.Round(div(s.PassInterval)))
	if pass < 1 {
		out.Notes = append(out.Notes, fmt.Sprintf("pass_interval %g s / %g is below the plugin's 1 s; using 1 s (%g s of trace time)",
			s.PassInterval, compression, compression))
		pass = 1
	}
	out.PassInterval = pass
	out.Notes = append(out.Notes, fmt.Sprintf("requeue hold: Slurm's cred_expire+1 = %d s, %g s of trace time (not scaled: 22.05 refuses cred_expire < 5)",
		RequeueHold, RequeueHold*compression))
	if t.Mode == priority.ModeGittins {
		out.Notes = append(out.Notes, fmt.Sprintf("gittins: the index uses the bundled seed distribution (unscaled GPU-s) on both sides: gittins_min_history is %d, so the core never learns from the slice's scaled GPU-s",
			GittinsMinHistory))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tiresias:\n  mode: %s\n", t.Mode)
	if len(t.ThresholdQuantiles) > 0 {
		return Scaled{}, fmt.Errorf("%w: threshold_quantiles rank by the unscaled seed distribution; fix the thresholds (GPU-seconds) to scale them", ErrReplay)
	}
	th := make([]string, len(t.Thresholds))
	for i, v := range t.Thresholds {
		th[i] = strconv.FormatFloat(div(v), 'g', -1, 64)
	}
	fmt.Fprintf(&b, "  thresholds: [%s]\n", strings.Join(th, ", "))
	fmt.Fprintf(&b, "  promote_knob: %g\n", t.PromoteKnob)
	fmt.Fprintf(&b, "  max_age: %g\n", div(t.MaxAge))
	fmt.Fprintf(&b, "  sibling_window: %g\n", div(t.SiblingWindow))
	fmt.Fprintf(&b, "  effective_service: %t\n", t.EffectiveService)
	fmt.Fprintf(&b, "  gittins_min_history: %d\n", GittinsMinHistory)
	// One user submits every job of the replay, where the trace's are many
	// users': with inheritance on, a job submitted within sibling_window
	// of the end of one of the same account and size would take its
	// service as a resubmission. Traces have no users and the simulator
	// models no inheritance (sim.DefaultPolicyOptions turns it off).
	fmt.Fprintf(&b, "  inherit_service: false\n")
	fmt.Fprintf(&b, "  weights: {tiresias: %g, age: %g, partition: %g, qos: %g}\n",
		t.Weights.Tiresias, t.Weights.Age, t.Weights.Partition, t.Weights.QOS)
	p := t.Preemption
	fmt.Fprintf(&b, "  preemption: {min_run: %g, max_per_job: %d, queue_gap: %d, promoted_preempts: %t, spread_victims: %t}\n",
		div(p.MinRun), p.MaxPerJob, p.QueueGap, p.PromotedPreempts, p.SpreadVictims)
	fs := t.FairShare
	fmt.Fprintf(&b, "fairshare: {enabled: %t, half_life: %g, default_shares: %g}\n", fs.Enabled, div(fs.HalfLife), fs.DefaultShares)
	fmt.Fprintf(&b, "synergy: {fallback_after: %g}\n", div(s.FallbackAfter))
	fmt.Fprintf(&b, "pass_interval: %d\n", pass)
	out.YAML = b.String()
	cfg, err := config.Parse(strings.NewReader(out.YAML + "db_path: /nonexistent/replay.db\n"))
	if err != nil {
		return Scaled{}, fmt.Errorf("%w: scaled settings: %w", ErrReplay, err)
	}
	out.Config = cfg
	return out, nil
}

// ScaleTrace compresses a trace: submit times divided by compression,
// durations too and then rounded to whole seconds, at least 1 (see the
// package doc). Jobs wider than maxGPUs are dropped (the replay runs every
// job on one node); dropped says how many.
func ScaleTrace(t *sim.Trace, compression float64, maxGPUs int) (scaled *sim.Trace, dropped int, err error) {
	if !(compression >= 1) || math.IsInf(compression, 0) {
		return nil, 0, fmt.Errorf("%w: compression %v must be a finite number >= 1", ErrReplay, compression)
	}
	out := &sim.Trace{Name: t.Name}
	for _, j := range t.Jobs {
		if j.GPUs > maxGPUs {
			dropped++
			continue
		}
		j.Submit /= compression
		j.Duration = max(1, math.Round(j.Duration/compression))
		out.Jobs = append(out.Jobs, j)
	}
	if len(out.Jobs) == 0 {
		return nil, dropped, fmt.Errorf("%w: no job of %s fits a node of %d GPUs", ErrReplay, t.Name, maxGPUs)
	}
	return out, dropped, nil
}

// Slice cuts a replay's slice from a trace: jobs of the given virtual
// clusters (all when none) that fit one node of maxGPUs, the first skip
// dropped, then limit kept (all when 0). Jobs wider than a node are left
// out before counting, so the slice has limit jobs when the trace has them.
func Slice(t *sim.Trace, clusters []string, skip, limit, maxGPUs int) (*sim.Trace, error) {
	narrow := &sim.Trace{Name: t.Name, Start: t.Start}
	for _, j := range t.Jobs {
		if j.GPUs <= maxGPUs {
			narrow.Jobs = append(narrow.Jobs, j)
		}
	}
	return narrow.Select(sim.Filter{Clusters: clusters, Skip: skip, Limit: limit})
}
