package replay

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim"
)

// Outcome is one job's result on one side, in seconds of replay time from
// the first submission.
type Outcome struct {
	ID uint32 // the trace's job id
	// SlurmID is the cluster's job id: Slurm numbers jobs in submission
	// order and breaks priority ties by it, so the simulator, which breaks
	// them by job id too, is given it in place of the trace's.
	SlurmID     uint32
	GPUs        int
	Model       string  // the sizing replays' model; "" otherwise
	Duration    float64 // scaled run time
	Submit      float64
	FirstStart  float64
	End         float64
	Preemptions int
}

// JCT is submission to final end.
func (o Outcome) JCT() float64 { return o.End - o.Submit }

// Side is one side of the comparison.
type Side struct {
	Label string
	Jobs  []Outcome // in trace order
}

// Summary is a side's row of the table, in seconds of replay time.
type Summary struct {
	Jobs                int
	AvgJCT, MedianJCT   float64
	P95JCT              float64
	Makespan            float64
	PreemptionsPerJob   float64
	MaxPreemptionsOfJob int
}

// Summarise computes a side's row.
func (s Side) Summarise() Summary {
	out := Summary{Jobs: len(s.Jobs)}
	if len(s.Jobs) == 0 {
		return out
	}
	jct := make([]float64, len(s.Jobs))
	first, last := math.Inf(1), math.Inf(-1)
	pre := 0
	for i, o := range s.Jobs {
		jct[i] = o.JCT()
		out.AvgJCT += jct[i]
		first, last = min(first, o.Submit), max(last, o.End)
		pre += o.Preemptions
		out.MaxPreemptionsOfJob = max(out.MaxPreemptionsOfJob, o.Preemptions)
	}
	sort.Float64s(jct)
	out.AvgJCT /= float64(len(jct))
	out.MedianJCT = sim.Median(jct)
	out.P95JCT = sim.Percentile(jct, 95)
	out.Makespan = last - first
	out.PreemptionsPerJob = float64(pre) / float64(len(s.Jobs))
	return out
}

// Ratios are the per-job JCT ratios cluster/simulator, sorted.
func Ratios(cluster, simulated Side) []float64 {
	byID := map[uint32]float64{}
	for _, o := range simulated.Jobs {
		byID[o.ID] = o.JCT()
	}
	var r []float64
	for _, o := range cluster.Jobs {
		if s, ok := byID[o.ID]; ok && s > 0 {
			r = append(r, o.JCT()/s)
		}
	}
	slices.Sort(r)
	return r
}

// Difference is (a − b) / b, the relative difference of the cluster's
// figure a from the simulator's b; 0 when both are 0.
func Difference(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return (a - b) / b
}

// Comparison is one policy's replay next to its simulation.
type Comparison struct {
	Policy     string
	Cluster    Side
	Simulation Side
	// RestartsMismatched counts jobs whose requeues in slurmctld's log
	// differ from Slurm's Restarts count (scontrol show job); 0 unless
	// the log reader missed a line.
	RestartsMismatched int
}

// WriteTable prints the side-by-side table of comparisons; times are in
// seconds of replay time and, in brackets, of trace time (× compression).
func WriteTable(w io.Writer, compression float64, cs []Comparison) {
	fmt.Fprintf(w, "\nTimes in seconds of replay time; ×%g for trace time. diff = (cluster − simulator) / simulator.\n", compression)
	fmt.Fprintf(w, "%-12s %-10s %5s %8s %8s %8s %9s %9s\n", "policy", "side", "jobs", "avg JCT", "median", "p95", "makespan", "preempt/j")
	for _, c := range cs {
		a, b := c.Cluster.Summarise(), c.Simulation.Summarise()
		row := func(label string, s Summary) {
			fmt.Fprintf(w, "%-12s %-10s %5d %8.1f %8.1f %8.1f %9.1f %9.2f\n", c.Policy, label, s.Jobs,
				s.AvgJCT, s.MedianJCT, s.P95JCT, s.Makespan, s.PreemptionsPerJob)
		}
		row("cluster", a)
		row("simulator", b)
		fmt.Fprintf(w, "%-12s %-10s %5s %+7.0f%% %+7.0f%% %+7.0f%% %+8.0f%% %9s\n", c.Policy, "diff", "",
			100*Difference(a.AvgJCT, b.AvgJCT), 100*Difference(a.MedianJCT, b.MedianJCT),
			100*Difference(a.P95JCT, b.P95JCT), 100*Difference(a.Makespan, b.Makespan),
			fmt.Sprintf("%+.2f", a.PreemptionsPerJob-b.PreemptionsPerJob))
	}
	fmt.Fprintf(w, "\nPer-job JCT ratio cluster/simulator:\n%-12s %6s %6s %6s %6s %6s %6s %11s %11s\n",
		"policy", "min", "p10", "median", "p90", "max", "mean", "within 10%", "within 25%")
	for _, c := range cs {
		r := Ratios(c.Cluster, c.Simulation)
		if len(r) == 0 {
			continue
		}
		var mean float64
		in10, in25 := 0, 0
		for _, v := range r {
			mean += v
			if math.Abs(v-1) <= 0.10 {
				in10++
			}
			if math.Abs(v-1) <= 0.25 {
				in25++
			}
		}
		mean /= float64(len(r))
		fmt.Fprintf(w, "%-12s %6.2f %6.2f %6.2f %6.2f %6.2f %6.2f %10.0f%% %10.0f%%\n", c.Policy,
			r[0], sim.Percentile(r, 10), sim.Median(r), sim.Percentile(r, 90), r[len(r)-1], mean,
			100*float64(in10)/float64(len(r)), 100*float64(in25)/float64(len(r)))
	}
	fmt.Fprintf(w, "\nSlurm's latencies (cluster side, replay seconds; the simulator models them by -scheduler-tick and -launch-overhead):\n%-12s %24s %30s\n",
		"policy", "submit->start, free GPUs", "run beyond duration, no requeue")
	for _, c := range cs {
		l := MeasureLatency(c)
		fmt.Fprintf(w, "%-12s %5d jobs: median %4.2f max %4.2f %5d jobs: median %4.2f max %4.2f\n", c.Policy,
			l.StartJobs, l.StartMedian, l.StartMax, l.RunJobs, l.RunOverMedian, l.RunOverMax)
	}
	if syn, prop, ok := SizingRatios(cs); ok {
		fmt.Fprintf(w, "\nSynergy / proportional average JCT: cluster %.3f, simulator %.3f, diff %+.0f%%\n",
			syn, prop, 100*Difference(syn, prop))
	}
	for _, c := range cs {
		if c.RestartsMismatched > 0 {
			fmt.Fprintf(w, "%s: %d jobs' requeues in slurmctld's log differ from scontrol's Restarts; the log reader missed lines\n",
				c.Policy, c.RestartsMismatched)
		}
	}
}

// SizingRatios are Synergy's average JCT over the proportional share's on
// the cluster and in the simulator, when cs holds both sizings.
func SizingRatios(cs []Comparison) (cluster, simulated float64, ok bool) {
	var syn, prop *Comparison
	for i := range cs {
		switch cs[i].Policy {
		case Synergy:
			syn = &cs[i]
		case Proportional:
			prop = &cs[i]
		}
	}
	if syn == nil || prop == nil {
		return 0, 0, false
	}
	ratio := func(a, b Side) float64 {
		sa, sb := a.Summarise(), b.Summarise()
		if sb.AvgJCT == 0 {
			return math.NaN()
		}
		return sa.AvgJCT / sb.AvgJCT
	}
	return ratio(syn.Cluster, prop.Cluster), ratio(syn.Simulation, prop.Simulation), true
}

// Latency is what Slurm adds, measured on the cluster side, against which
// the simulator's SchedulerTick and LaunchOverhead are set: how long a job
// whose GPUs were free (it started within a scheduler round in the
// simulator) waited from submission to its first start, and how much
// longer than its duration a job that was never requeued held its GPUs
// (launch, the sleeper's own overhead, the end's report). Medians and
// maxima over the jobs that qualify, replay seconds.
type Latency struct {
	StartJobs, RunJobs        int
	StartMedian, StartMax     float64
	RunOverMedian, RunOverMax float64
}

// MeasureLatency measures c's Latency against its simulation.
func MeasureLatency(c Comparison) Latency {
	simByID := map[uint32]Outcome{}
	for _, o := range c.Simulation.Jobs {
		simByID[o.ID] = o
	}
	var start, over []float64
	for _, o := range c.Cluster.Jobs {
		// Free GPUs: the simulator started it at its arrival, or at the
		// scheduler's next round after it when it models the rounds.
		if s, ok := simByID[o.ID]; ok && s.FirstStart-s.Submit <= DefaultSchedulerTick {
			start = append(start, o.FirstStart-o.Submit)
		}
		if o.Preemptions == 0 {
			over = append(over, o.End-o.FirstStart-o.Duration)
		}
	}
	slices.Sort(start)
	slices.Sort(over)
	l := Latency{StartJobs: len(start), RunJobs: len(over)}
	if len(start) > 0 {
		l.StartMedian, l.StartMax = sim.Median(start), start[len(start)-1]
	}
	if len(over) > 0 {
		l.RunOverMedian, l.RunOverMax = sim.Median(over), over[len(over)-1]
	}
	return l
}

// ClusterSide turns the log's records into outcomes, in the order of
// jobs; ids maps each trace job id to its Slurm job id. Every job must
// have been submitted and have ended.
func ClusterSide(label string, jobs []sim.Job, ids map[uint32]uint32, recs map[uint32]*Record) (Side, error) {
	origin := time.Time{}
	for _, j := range jobs {
		rec := recs[ids[j.ID]]
		if rec == nil || rec.Submit.IsZero() || rec.End.IsZero() || len(rec.Runs) == 0 {
			return Side{}, fmt.Errorf("%w: slurmctld's log lacks the submission, a start or the end of job %d (Slurm job %d)",
				ErrReplay, j.ID, ids[j.ID])
		}
		if origin.IsZero() || rec.Submit.Before(origin) {
			origin = rec.Submit
		}
	}
	sec := func(t time.Time) float64 { return t.Sub(origin).Seconds() }
	side := Side{Label: label}
	for _, j := range jobs {
		rec := recs[ids[j.ID]]
		side.Jobs = append(side.Jobs, Outcome{ID: j.ID, SlurmID: ids[j.ID], GPUs: j.GPUs, Model: j.Model, Duration: j.Duration,
			Submit: sec(rec.Submit), FirstStart: sec(rec.Runs[0].Start), End: sec(rec.End), Preemptions: rec.Requeues()})
	}
	return side, nil
}

// SimCosts are the simulator's settings for what Slurm costs on the
// loopback cluster, in replay seconds.
type SimCosts struct {
	// RestartPenalty is the work a requeued job loses when it starts
	// again: scripts/demo-train.sh saves its progress once a second.
	RestartPenalty float64
	RequeueHold    float64
	PassInterval   float64
	// SchedulerTick and LaunchOverhead are Slurm's own latencies
	// (sim.Config's): DefaultSchedulerTick and what MeasureLatency
	// reports as the run beyond duration.
	SchedulerTick  float64
	LaunchOverhead float64
	// BackfillInterval is sched/backfill's cycle on the loopback cluster
	// (bf_interval, DefaultBackfillInterval; sim.Config's).
	BackfillInterval float64
	// FallbackAfter is synergy.fallback_after as the cluster has it
	// (Scaled.Config), for the sizings.
	FallbackAfter float64
}

// DefaultSchedulerTick is slurmctld 22.05's background loop period.
const DefaultSchedulerTick = 1

// DefaultBackfillInterval is sched/backfill's cycle on the loopback
// cluster: bf_interval in scripts/cluster.sh's SchedulerParameters.
const DefaultBackfillInterval = 2

// DefaultLaunchOverhead is the run beyond duration that MeasureLatency
// found at the median on the shared development machine (0.15–0.19 s in
// every policy of a 200-job slice, docs/evaluation section 7).
const DefaultLaunchOverhead = 0.15

// Simulate runs the cluster side's jobs, at the submission times Slurm
// recorded, through the simulator under policy, and returns its side.
// profiles (SimProfiles) are needed for the sizings: Synergy is the
// simulator's AllocStart, slurmctld's sizing at submission and start.
func Simulate(policy string, shape sim.Shape, scaled Scaled, costs SimCosts, clusterSide Side, profiles sensitivity.Profiles) (Side, *sim.Result, error) {
	cfg := sim.DefaultConfig()
	cfg.Shape = shape
	cfg.Alloc = sim.AllocProportional
	cfg.Models = sim.ModelsAsGiven
	cfg.Profiles = profiles
	cfg.RestartPenalty, cfg.RequeueHold, cfg.PassInterval = costs.RestartPenalty, costs.RequeueHold, costs.PassInterval
	cfg.SchedulerTick, cfg.LaunchOverhead = costs.SchedulerTick, costs.LaunchOverhead
	cfg.FallbackAfter = costs.FallbackAfter
	cfg.BackfillInterval = costs.BackfillInterval
	cfg.PartialNodeIdle = true
	cfg.PolicyOptions.Tiresias = scaled.Config.Tiresias
	switch policy {
	case Multifactor:
		cfg.Policy = sim.PolicyAge
	case LAS, Gittins:
		cfg.Policy = policy
	case Synergy, Proportional:
		if len(profiles) == 0 {
			return Side{}, nil, fmt.Errorf("%w: %s needs the models' profiles", ErrReplay, policy)
		}
		cfg.Policy = LAS
		if policy == Synergy {
			cfg.Alloc = sim.AllocStart
		}
	default:
		return Side{}, nil, fmt.Errorf("%w: unknown policy %q (%v)", ErrReplay, policy, Policies)
	}
	tr := &sim.Trace{Name: "replay"}
	for _, o := range clusterSide.Jobs {
		tr.Jobs = append(tr.Jobs, sim.Job{ID: o.SlurmID, Submit: o.Submit, GPUs: o.GPUs, Duration: o.Duration, Model: o.Model})
	}
	slices.SortStableFunc(tr.Jobs, func(a, b sim.Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return int(int64(a.ID) - int64(b.ID))
	})
	res, err := sim.Run(cfg, tr)
	if err != nil {
		return Side{}, nil, err
	}
	byID := map[uint32]sim.JobResult{}
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}
	side := Side{Label: "simulator"}
	for _, o := range clusterSide.Jobs {
		j, ok := byID[o.SlurmID]
		if !ok {
			return Side{}, nil, fmt.Errorf("%w: the simulator lost job %d", ErrReplay, o.ID)
		}
		side.Jobs = append(side.Jobs, Outcome{ID: o.ID, SlurmID: o.SlurmID, GPUs: j.GPUs, Model: o.Model, Duration: j.Duration, Submit: j.Submit,
			FirstStart: j.FirstStart, End: j.Finish, Preemptions: j.Preemptions})
	}
	return side, res, nil
}

// WriteOutcomesCSV writes every job of every comparison, both sides, to
// path (its folder made if missing): policy, side, job, GPUs, model, and
// its duration, submit, first start, end and JCT in seconds, and its
// preemptions.
func WriteOutcomesCSV(path string, cs []Comparison) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"policy", "side", "job", "gpus", "model", "duration_s", "submit_s", "first_start_s", "end_s", "jct_s", "preemptions"}) //nolint:errcheck
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	for _, c := range cs {
		for _, s := range []Side{c.Cluster, c.Simulation} {
			for _, o := range s.Jobs {
				w.Write([]string{c.Policy, s.Label, strconv.FormatUint(uint64(o.ID), 10), strconv.Itoa(o.GPUs), o.Model, //nolint:errcheck
					num(o.Duration), num(o.Submit), num(o.FirstStart), num(o.End), num(o.JCT()), strconv.Itoa(o.Preemptions)})
			}
		}
	}
	w.Flush()
	return w.Error()
}
