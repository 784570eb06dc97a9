package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// ErrBadConfig is wrapped by every error about a simulation's settings.
var ErrBadConfig = errors.New("bad simulation config")

// Orderer puts the active jobs (pending and running) of a pass in priority
// order. It is the part of a policy that differs between policies; placing,
// skipping and preempting are shared (see Policy).
type Orderer interface {
	// Order sorts jobs best first and sets levels[i] for the job that ends
	// up at jobs[i]. Levels matter only to preemptive policies: a job may
	// preempt only jobs of a strictly larger level, and levels must not
	// decrease along the order.
	Order(now float64, jobs []*JobState, levels []float64)
	// NextChange is the earliest time after now at which the order may
	// change in a way the scheduler must act on without any arrival or
	// completion (a demotion, a promotion), or +Inf.
	NextChange(now float64, jobs []*JobState) float64
}

// Policy is an ordering plus the two rules that turn it into decisions.
type Policy struct {
	Name  string
	Order Orderer
	// Preemptive: a pending job that does not fit may requeue running jobs
	// of a strictly larger level to make room.
	Preemptive bool
	// PreemptRankedBelow widens Preemptive to every running job ranked
	// below, whatever its level: the Tiresias reference simulator re-places
	// all jobs in rank order at every event, so a job demoted into a queue
	// behind waiting jobs is preempted by them. Lachesis preempts only
	// across queues (design: preempt/tiresias), which this leaves off.
	PreemptRankedBelow bool
	// Victim, when set, is the rest of the rule: may preemptor requeue
	// this running job now (its run length, its preemptions)? The Tiresias
	// policies ask priority.Preemption.Decide, as slurmctld's core does.
	Victim func(preemptor, victim *JobState, now float64) bool
	// Preempts is the rule between levels: may a pending job of level
	// preemptor requeue a running job of level victim? It must hold for
	// every victim level above some bound and for none below, since the
	// engine walks the order as a suffix. Nil: victim > preemptor. The
	// Tiresias policies use priority.Preempts, slurmctld's own rule.
	Preempts func(preemptor, victim float64) bool
	// VictimOrder, when set, orders the running jobs a preemptor may take,
	// first taken first (negative: a before b). Nil: lowest-ranked first.
	// The Tiresias policies use priority.Preemption.CompareVictims, the
	// order slurmctld's core gives Slurm.
	VictimOrder func(a, b *JobState) int
	// HeadOfLine: stop at the first pending job that does not fit (strict
	// FIFO); otherwise skip it and go on (backfill-like, work-conserving).
	HeadOfLine bool
}

// Policy names.
const (
	PolicyFIFO     = "fifo"
	PolicyFIFOSkip = "fifo-skip"
	PolicyAge      = "age"
	PolicySRTF     = "srtf"
	PolicyLAS      = "las"
	PolicyGittins  = "gittins"
)

// PolicyNames lists every policy, in the order reports show them.
var PolicyNames = []string{PolicyFIFO, PolicyFIFOSkip, PolicyAge, PolicySRTF, PolicyLAS, PolicyGittins}

// PolicyOptions parameterise the policies that have parameters.
type PolicyOptions struct {
	// Tiresias is the priority package's config for las and gittins; its
	// Mode is set from the policy name.
	Tiresias priority.Config
	// Gittins is the GPU-time distribution of the gittins policy;
	// priority.SeedDistribution() when nil.
	Gittins *priority.Distribution
	// LearnEvery > 0 rebuilds the Gittins distribution from the GPU-time
	// of the jobs completed so far (seed samples included) every
	// LearnEvery completions, as the core does from its ledger.
	LearnEvery int
	// ReferencePreemption makes las and gittins behave like the Tiresias
	// reference simulator's dlas-gpu: inside a queue, running jobs stay
	// ahead of waiting ones and a job entering a queue joins its back
	// (gittins: then by index, later submission first, as the reference
	// sorts); every job ranked above may take a running job's GPUs
	// (Policy.PreemptRankedBelow), with none of Preemption's costs.
	ReferencePreemption bool
	// AgeWeight and MaxAge are Slurm's PriorityWeightAge and
	// PriorityMaxAge (seconds) for the age policy; SizeWeight is
	// PriorityWeightJobSize with PriorityFavorSmall=YES (fewer GPUs, higher
	// priority), 0 by default so the policy is age alone.
	AgeWeight  float64
	MaxAge     float64
	SizeWeight float64
	// clusterGPUs scales the job-size factor; the engine sets it.
	clusterGPUs int
}

// DefaultPolicyOptions are Lachesis's defaults (priority.DefaultConfig) and
// Slurm's usual age settings.
//
// Fair share between accounts, on by default in slurmctld, is off here
// (with the core's half-life and equal shares ready): the papers' figures
// and the published tables have no accounts, so a run turns it on
// (Tiresias.FairShare.Enabled) to compare.
func DefaultPolicyOptions() PolicyOptions {
	o := PolicyOptions{
		Tiresias:  priority.DefaultConfig(),
		AgeWeight: 1000,
		MaxAge:    7 * 24 * 3600,
	}
	o.Tiresias.FairShare = priority.DefaultFairShare()
	o.Tiresias.FairShare.Enabled = false
	// A trace's virtual clusters are its accounts, all known: equal
	// shares unless -fairshare-shares says otherwise (the core's default
	// of 0 guards against names users make up, which traces have none of).
	o.Tiresias.FairShare.DefaultShares = 1
	// Nor do traces have users or cancellations: no job replaces another,
	// so none inherits service (policy/priority/inherit.go; the core's only).
	o.Tiresias.InheritService = false
	return o
}

// NewPolicy builds a policy by name:
//
//   - fifo: submit order, strict: the first job that does not fit blocks
//     all behind it.
//   - fifo-skip: submit order, jobs that do not fit are skipped.
//   - age: Slurm multifactor priority, round(AgeWeight × min(1,
//     wait/MaxAge) + SizeWeight × (1 − GPUs/cluster GPUs)), ties by submit
//     time and ID, skipping like Slurm's backfill. With SizeWeight 0 (the
//     default) the priority never increases with submit time, so the order
//     is exactly fifo-skip's: age alone does not change what Slurm runs.
//   - srtf: shortest remaining time first with known durations (the
//     clairvoyant reference), preemptive.
//   - las, gittins: Tiresias through the priority package's Ranker (2D-LAS
//     and 2D-Gittins), preempting only across queues.
//
// Each call returns a fresh policy: orderers keep per-run state.
func NewPolicy(name string, opts PolicyOptions) (Policy, error) {
	switch name {
	case PolicyFIFO:
		return Policy{Name: name, Order: submitOrder{}, HeadOfLine: true}, nil
	case PolicyFIFOSkip:
		return Policy{Name: name, Order: submitOrder{}}, nil
	case PolicyAge:
		if !(opts.AgeWeight > 0) || !(opts.MaxAge > 0) || math.IsInf(opts.MaxAge, 0) || !(opts.SizeWeight >= 0) {
			return Policy{}, fmt.Errorf("%w: age policy needs AgeWeight > 0, a finite MaxAge > 0 and SizeWeight >= 0", ErrBadConfig)
		}
		return Policy{Name: name, Order: &ageOrder{age: opts.AgeWeight, maxAge: opts.MaxAge,
			size: opts.SizeWeight, clusterGPUs: float64(max(opts.clusterGPUs, 1))}}, nil
	case PolicySRTF:
		return Policy{Name: name, Order: remainingOrder{}, Preemptive: true}, nil
	case PolicyLAS, PolicyGittins:
		o, err := newTiresiasOrder(name, opts)
		if err != nil {
			return Policy{}, err
		}
		p := Policy{Name: name, Order: o, Preemptive: true}
		if opts.ReferencePreemption {
			// The reference simulator has no preemption costs: a job
			// ranked above takes the GPUs of any running job below it.
			p.PreemptRankedBelow = true
			return p, nil
		}
		rule := o.cfg.Preemption
		p.Preempts = func(preemptor, victim float64) bool {
			return rule.QueuePreempts(int(preemptor), int(victim))
		}
		p.Victim = func(preemptor, victim *JobState, now float64) bool {
			return rule.Decide(preemptor.Account.Candidate(preemptor.Account.Queue, 0),
				victim.Account.Candidate(victim.Account.Queue, now-victim.RunStart)) == priority.Allowed
		}
		if rule.SpreadVictims {
			p.VictimOrder = func(a, b *JobState) int {
				return rule.CompareVictims(&o.floor, a.victim(), b.victim())
			}
		}
		return p, nil
	}
	return Policy{}, fmt.Errorf("%w: unknown policy %q (%s)", ErrBadConfig, name, strings.Join(PolicyNames, ", "))
}

// preempts is p.Preempts or, when nil, a strictly larger level.
func (p *Policy) preempts(preemptor, victim float64) bool {
	if p.Preempts != nil {
		return p.Preempts(preemptor, victim)
	}
	return victim > preemptor
}
