package sim

import (
	"fmt"
	"math"

	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/synergy"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Config is one simulation: a cluster, a policy, an allocation mode.
type Config struct {
	Shape         Shape
	Policy        string
	PolicyOptions PolicyOptions
	Alloc         AllocMode
	// Profiles are the models' throughput tables; needed for AllocSynergy,
	// and for speeds under AllocProportional on nodes that are not
	// Synergy's shape.
	Profiles sensitivity.Profiles
	// Tolerance is the best-case tolerance (sensitivity.DefaultTolerance).
	Tolerance float64
	// Reserve is sensitivity.Allocator.Reserve.
	Reserve float64
	// FallbackAfter is start-time sizing's patience under AllocStart, in
	// seconds: how long a job its request holds back may wait for it
	// before it is lowered (synergy.Config.Waits, with the core's
	// fallback_after; synergy.DefaultFallbackAfter by default).
	FallbackAfter float64
	Models        ModelRule
	// Seed drives the model rule, the only random choice in a simulation.
	Seed uint64
	// RestartPenalty is the time (seconds) a preempted job spends after it
	// restarts before it makes progress again: reloading its checkpoint,
	// Slurm's requeue and prolog. The papers assume 0.
	RestartPenalty float64
	// RequeueHold is how long a preempted job waits before it may start
	// again: Slurm requeues it with BeginTime = now + cred_expire + 1
	// (121 s by default). The papers assume 0.
	RequeueHold float64
	// PartialNodeIdle leaves the GPUs a preemption freed but its
	// preemptor does not use idle until the next pass, as Slurm does
	// (cluster.freezeLeftover). The papers reuse them at once.
	PartialNodeIdle bool
	// PassInterval is the policy's pass interval in seconds. Passes run at
	// every arrival and completion (Slurm schedules on those events), and
	// at the next multiple of PassInterval after a job crosses a queue
	// threshold or becomes due for promotion. 0 acts on crossings at the
	// whole second they happen, like the Tiresias reference simulator.
	PassInterval float64
	// TickPassesOnly also delays arrivals and completions to the next pass
	// tick, for a scheduler that acts only on its own timer.
	TickPassesOnly bool
	// SchedulerTick, when > 0, is the period of slurmctld's background
	// loop (1 s in 22.05: controller.c sleeps 10 × 100 ms between
	// rounds), which runs the scheduling an arrival or a completion asks
	// for (queue_job_scheduler): what such an event makes startable starts
	// at the loop's next round after it, not at the event. 0 starts it at
	// the event. A second is nothing against hour-long jobs, so the
	// default is 0; a time-compressed replay (internal/rigs/replay), where
	// a second of replay is a hundred of trace, needs it.
	SchedulerTick float64
	// LaunchOverhead is how long every run holds its GPUs before its job
	// makes progress (seconds): slurmd's launch of the batch step and,
	// after the end, the report to slurmctld. 0 by default, for the same
	// reason as SchedulerTick.
	LaunchOverhead float64
	// BackfillInterval, when > 0, models Slurm's two schedulers, in
	// seconds (bf_interval). Slurm's main scheduler walks the queue in
	// priority order and stops at the first job that can neither start
	// nor preempt (job_scheduler.c's fail_by_part: nothing of lower
	// priority in the partition starts); the jobs behind it start only
	// from sched/backfill, every BackfillInterval, and a job that
	// backfill starts by preempting holds the nodes it preempted on for
	// the rest of that cycle (its reservation: no other job starts or
	// preempts there until the next one) and starts at a later pass, once
	// its victims are requeued. A pass at a multiple of
	// BackfillInterval is a backfill cycle; every other pass is the main
	// scheduler; a cycle is woken at the pass tick at or after it, so
	// PassInterval should divide BackfillInterval (the replay's 1 s and 2
	// s). 0 (the default) walks the whole queue at every pass,
	// starting and preempting wherever a job fits: when every job asks
	// for the same shape the two agree, and a backfill cycle is nothing
	// against hour-long jobs; a time-compressed replay of jobs of
	// different shapes (Synergy's sizing) needs it.
	BackfillInterval float64
	// RecordRuns keeps every run of every job in the Result (for checking
	// invariants), and with sharing every pair and promotion
	// (Result.SharingHistory); it costs memory on long traces.
	RecordRuns bool
	// Progress, if set, is called from the simulating goroutine with the
	// number of jobs completed since its previous call.
	Progress func(completed int)
	// Hetero, if set, makes the cluster heterogeneous (see HeteroConfig).
	Hetero *HeteroConfig
	// Sharing, if set, is GPU sharing between job classes (see
	// SharingConfig); nil runs exactly as before sharing existed.
	Sharing *SharingConfig
}

// DefaultConfig is a 2D-LAS run on DefaultShape with proportional
// allocation and a real cluster's costs of preemption: the core's 30 s
// pass interval, a 60 s restart penalty (checkpoint reload), Slurm's
// 121 s requeue hold and idle leftover GPUs (RealCosts).
func DefaultConfig() Config {
	c := Config{
		Shape:         DefaultShape(),
		Policy:        PolicyLAS,
		PolicyOptions: DefaultPolicyOptions(),
		Alloc:         AllocProportional,
		Tolerance:     sensitivity.DefaultTolerance,
		Reserve:       sensitivity.DefaultReserve,
		FallbackAfter: synergy.DefaultFallbackAfter.Seconds(),
		Models:        ModelsAssign,
	}
	c.RealCosts()
	return c
}

// Real costs of preemption on a Slurm cluster, the simulator's defaults.
const (
	DefaultRestartPenalty = 60
	DefaultRequeueHold    = 121 // cred_expire (120 s) + 1
	DefaultPassInterval   = 30
)

// RealCosts sets the costs a preemption has on a Slurm cluster.
func (c *Config) RealCosts() {
	c.RestartPenalty, c.RequeueHold = DefaultRestartPenalty, DefaultRequeueHold
	c.PassInterval, c.PartialNodeIdle = DefaultPassInterval, true
}

// NoCosts is the papers' and the reference simulator's idealisation: no
// restart penalty, no hold, leftover GPUs reused at once, demotions acted
// on at the second they happen.
func (c *Config) NoCosts() {
	c.RestartPenalty, c.RequeueHold, c.PassInterval, c.PartialNodeIdle = 0, 0, 0, false
}

func (c *Config) validate() error {
	if err := c.Shape.validate(); err != nil {
		return err
	}
	switch c.Alloc {
	case AllocProportional:
	case AllocSynergy, AllocStart:
		if len(c.Profiles) == 0 {
			return fmt.Errorf("%w: synergy allocation needs model profiles", ErrBadConfig)
		}
		if c.Shape.GPUCountOnly {
			return fmt.Errorf("%w: synergy allocation needs CPUs and memory, not GPU counting only", ErrBadConfig)
		}
	default:
		return fmt.Errorf("%w: allocation %q is not %q, %q or %q", ErrBadConfig, c.Alloc, AllocProportional, AllocSynergy, AllocStart)
	}
	switch c.Models {
	case ModelsAssign, ModelsAsGiven:
	default:
		return fmt.Errorf("%w: model rule %q is not %q or %q", ErrBadConfig, c.Models, ModelsAssign, ModelsAsGiven)
	}
	for name, v := range map[string]float64{"restart penalty": c.RestartPenalty, "requeue hold": c.RequeueHold, "pass interval": c.PassInterval,
		"scheduler tick": c.SchedulerTick, "launch overhead": c.LaunchOverhead, "fallback after": c.FallbackAfter,
		"backfill interval": c.BackfillInterval} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%w: %s %v must be a finite number of seconds >= 0", ErrBadConfig, name, v)
		}
	}
	if c.BackfillInterval > 0 && c.Hetero != nil {
		return fmt.Errorf("%w: backfill interval is modelled on homogeneous clusters only", ErrBadConfig)
	}
	return nil
}

// CrossCheckConfig is the Tiresias reference simulator's setting for its
// 60-job example: 4 nodes × 4 GPUs counted as a pool, K=3 with thresholds
// 3250/7200 GPU-s, no promotion, no restart penalty, demotions acted on at
// the whole second they happen, models as the trace names them.
func CrossCheckConfig() Config {
	c := DefaultConfig()
	c.Shape = Shape{Nodes: 4, GPUsPerNode: 4, GPUCountOnly: true}
	c.PolicyOptions.Tiresias.FixThresholds([]float64{3250, 7200})
	c.PolicyOptions.Tiresias.PromoteKnob = 0
	c.PolicyOptions.Tiresias.Preemption = priority.Preemption{QueueGap: 1}
	c.NoCosts()
	c.Models = ModelsAsGiven
	return c
}
