package priority

import (
	"cmp"
	"fmt"
)

// Preemption is the cost side of Tiresias's preemption rule. Requeuing a
// job is not free on a real cluster: Slurm holds the victim for
// cred_expire+1 seconds before it may start again, the victim reloads its
// checkpoint, and GPUs the preemptor does not need sit idle until the next
// pass. A preemption pays for itself only if the victim has run long enough
// for that cost to be small against what it got, and if the preemptor's
// claim is real: these knobs say when that holds. The zero value is
// Tiresias as the paper states it.
type Preemption struct {
	// MinRun is the shortest run, in seconds, that may be preempted: the
	// cost of a requeue is spread over at least this much useful work, and
	// a job cannot be preempted more than once per MinRun of running. 0
	// lets any run be preempted.
	MinRun float64
	// MaxPerJob is the number of requeues after which a job is not
	// preempted again (it runs to completion once it starts); it bounds
	// the churn any one job can suffer. 0 is no limit.
	MaxPerJob int
	// QueueGap is how many queues the victim must sit below the
	// preemptor; 1 is the paper's "any lower queue". A larger gap is
	// hysteresis: jobs in neighbouring queues, whose service differs
	// little, do not trade GPUs.
	QueueGap int
	// PromotedPreempts lets a job that is in its queue only because of a
	// starvation promotion preempt others. Off, promotion moves a job to
	// the front of the waiting line but takes no running job's GPUs, so
	// promotion cannot ping-pong: the job it would have displaced cannot,
	// once promoted in turn, displace it back.
	PromotedPreempts bool
	// SpreadVictims changes which running jobs go first among those a
	// preemptor may take: in each queue, jobs requeued more often than
	// the least-requeued running job of that queue go after every job
	// that was not. Lowest-ranked first alone hits the same long jobs
	// again and again (a long job keeps its low rank in the last queue),
	// so a few jobs collect most requeues; spreading them bounds the tail
	// without making any job unpreemptable, which MaxPerJob does at a
	// large cost in JCT (a job past its budget holds its GPUs against
	// every short job).
	SpreadVictims bool
	// StrictOpportunistic is sharing.Config.StrictOpportunistic, which the
	// controller's config copies here (it is no preemption key): under it
	// a guaranteed job evicts an opportunistic one whatever either's
	// queue; off, only from a worse queue (Decide), the opportunistic
	// victims that ran least first (CompareVictims).
	StrictOpportunistic bool
}

// DefaultPreemption is the preemption part of DefaultConfig, from the
// sweep in docs/evaluation (4 Philly VCs at offered loads 0.8–1.8, real
// costs): a 10-minute minimum run, no per-job budget (a budget makes long
// jobs unpreemptable once spent, and they then hold GPUs against every
// short job), the paper's gap of one queue, and promotion without
// preemption.
//
// Victims are spread (SpreadVictims): in the same sweep that cuts the 99th
// percentile of requeues per job from 10 to 8 on the worst slice and from
// 15 to 11 on the sweep's worst, the longest run of requeues of one job
// from 21 to 15, with the worst and mean JCT/SRTF unchanged (1.35, 1.09).
func DefaultPreemption() Preemption {
	return Preemption{MinRun: 600, MaxPerJob: 0, QueueGap: 1, SpreadVictims: true}
}

// Candidate is what the preemption rule needs to know of one job. The
// zero value of each field restricts nothing, so a caller that has no
// partitions or arrays (the simulator) leaves them zero.
type Candidate struct {
	Queue int
	// RunSeconds is how long the job's current run has lasted (victims).
	RunSeconds float64
	// Preemptions is how many times the preemption rule has had the job
	// requeued (victims); requeues of other origins (the owner's own
	// `scontrol requeue`, a node failure) do not count.
	Preemptions int
	// Promoted says the job's queue comes from a starvation promotion
	// (preemptors).
	Promoted bool
	// Tier is the PriorityTier of the job's partition: a job never
	// preempts a job of a higher tier.
	Tier uint32
	// Array is the job array the job is a task of (0: none): tasks of one
	// array never preempt each other.
	Array uint32
	// Opportunistic: the job is in the opportunistic class
	// (opportunistic.go): it preempts nothing, and is the first victim of
	// every guaranteed job.
	Opportunistic bool
}

// Candidate describes the account's job for the preemption rule, its
// current run having lasted runSeconds; the caller adds Tier and Array.
func (a *Account) Candidate(queue int, runSeconds float64) Candidate {
	return Candidate{
		Queue:       queue,
		RunSeconds:  runSeconds,
		Preemptions: a.Preemptions,
		Promoted:    a.ServiceBase > 0,
	}
}

// Requeues is how many times the job was requeued, whatever requeued it:
// every run after the first followed one.
func (a *Account) Requeues() int { return max(0, a.Runs-1) }

// Verdict is the preemption rule's answer, with the reason when it is no.
type Verdict uint8

const (
	// Allowed: the preemptor may requeue the victim.
	Allowed Verdict = iota
	// DeniedQueue: the victim is not in a lower queue than the preemptor.
	DeniedQueue
	// DeniedPromoted: the preemptor holds its queue by a promotion.
	DeniedPromoted
	// DeniedMinRun: the victim's run is shorter than MinRun.
	DeniedMinRun
	// DeniedBudget: the victim has been preempted MaxPerJob times.
	DeniedBudget
	// DeniedQueueGap: the victim is in a lower queue, but fewer than
	// QueueGap queues below the preemptor.
	DeniedQueueGap
	// DeniedTier: the victim's partition has a higher PriorityTier.
	DeniedTier
	// DeniedSameArray: both are tasks of one job array.
	DeniedSameArray
	// DeniedOpportunistic: the preemptor is opportunistic, and an
	// opportunistic job preempts nothing.
	DeniedOpportunistic
	// DeniedWithinQuota: the victim runs within its own account's
	// guaranteed quota (quota.go), and the preemptor is of another account.
	DeniedWithinQuota
)

func (v Verdict) String() string {
	switch v {
	case Allowed:
		return "allowed"
	case DeniedQueue:
		return "victim not in a lower queue"
	case DeniedPromoted:
		return "preemptor promoted"
	case DeniedMinRun:
		return "victim's run shorter than min_run"
	case DeniedBudget:
		return "victim's preemption budget spent"
	case DeniedQueueGap:
		return "victim fewer than queue_gap queues below"
	case DeniedTier:
		return "victim's partition has a higher PriorityTier"
	case DeniedSameArray:
		return "both are tasks of one job array"
	case DeniedOpportunistic:
		return "preemptor is opportunistic"
	case DeniedWithinQuota:
		return "victim runs within its account's quota"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// QueuePreempts is the part of the rule that depends on queues alone: the
// victim sits at least QueueGap queues below the preemptor. It holds for
// every victim queue from some bound on, so a scheduler walking jobs in
// queue order can stop at the first queue it holds for.
func (p Preemption) QueuePreempts(preemptorQueue, victimQueue int) bool {
	return victimQueue-preemptorQueue >= max(1, p.QueueGap)
}

// Decide is the preemption rule: may preemptor requeue victim? Both the
// simulator and slurmctld's core ask it, so what the simulator measures is
// what the cluster does.
//
// Besides queues and costs, two decisions about who may take whose GPUs:
// a job never preempts a job whose partition has a higher PriorityTier
// (the admin ranked that partition's work above it; Slurm itself schedules
// higher tiers first), and tasks of one job array never preempt each other
// (a user's array would otherwise requeue its own running tasks as soon as
// they are demoted, each requeue costing a hold and a reload for no gain
// to that user). The checks that hold for almost every pair come first,
// so a refusal names the rule that matters: a victim in the preemptor's
// own queue is DeniedQueue, not DeniedMinRun.
//
// The opportunistic class (opportunistic.go) comes before queues: an
// opportunistic preemptor is refused whatever the victim; an
// opportunistic victim of a guaranteed preemptor is allowed whatever the
// victim's run, its preemptions, the queue gap and the preemptor's
// promotion, since its GPUs were lent, not given, as long as it is in a
// worse queue than the preemptor (DeniedQueue otherwise: attained-service
// ranking runs it no later, and evicting it within its queue evicted the
// same short jobs again at every arrival, docs/evaluation section 8), or
// in any queue under StrictOpportunistic. Only the two decisions about who owns
// what still hold for it besides: a higher PriorityTier and the
// preemptor's own job array.
func (p Preemption) Decide(preemptor, victim Candidate) Verdict {
	switch {
	case preemptor.Opportunistic:
		return DeniedOpportunistic
	case victim.Opportunistic:
		switch {
		case !p.StrictOpportunistic && victim.Queue <= preemptor.Queue:
			return DeniedQueue
		case victim.Tier > preemptor.Tier:
			return DeniedTier
		case preemptor.Array != 0 && preemptor.Array == victim.Array:
			return DeniedSameArray
		}
		return Allowed
	case victim.Queue <= preemptor.Queue:
		return DeniedQueue
	case victim.Tier > preemptor.Tier:
		return DeniedTier
	case preemptor.Array != 0 && preemptor.Array == victim.Array:
		return DeniedSameArray
	case !p.QueuePreempts(preemptor.Queue, victim.Queue):
		return DeniedQueueGap
	case preemptor.Promoted && !p.PromotedPreempts:
		return DeniedPromoted
	case victim.RunSeconds < p.MinRun:
		return DeniedMinRun
	case p.MaxPerJob > 0 && victim.Preemptions >= p.MaxPerJob:
		return DeniedBudget
	}
	return Allowed
}

// Victim is what the victim order needs to know of one running job.
type Victim struct {
	Queue int
	// Preemptions is how many times the rule has had the job requeued
	// (Candidate.Preemptions).
	Preemptions int
	// Rank is the job's position in the pass's total order (0 best).
	Rank int
	// RunSeconds is how long the job's current run has lasted: the most
	// work a requeue throws away (opportunistic victims).
	RunSeconds float64
	// NoRequeue: Slurm may not requeue the job (--no-requeue), so
	// preempting it kills it and loses its work.
	NoRequeue bool
	// Opportunistic: the job is in the opportunistic class; such jobs go
	// before every guaranteed one. Do not Add them to the
	// PreemptionFloor: it is the guaranteed jobs' reference.
	Opportunistic bool
}

// PreemptionFloor is the fewest preemptions among the running jobs of
// each queue, taken over a pass's running jobs: the reference
// SpreadVictims compares a victim's preemptions with. The zero value is
// empty.
type PreemptionFloor struct {
	least [maxQueues]int
	seen  [maxQueues]bool
}

// Reset empties the floor for a new pass.
func (f *PreemptionFloor) Reset() { *f = PreemptionFloor{} }

// Add counts one running job. Queues beyond the last are clamped to it.
func (f *PreemptionFloor) Add(queue, preemptions int) {
	q := min(max(queue, 0), maxQueues-1)
	if !f.seen[q] || preemptions < f.least[q] {
		f.least[q], f.seen[q] = preemptions, true
	}
}

// above reports whether v has been preempted more often than the
// least-preempted running job of its queue.
func (f *PreemptionFloor) above(v Victim) bool {
	q := min(max(v.Queue, 0), maxQueues-1)
	return f.seen[q] && v.Preemptions > f.least[q]
}

// CompareVictims orders running jobs for preemption: negative when a goes
// before b. Opportunistic jobs first, whatever their queue
// (opportunistic.go), and of them (but under StrictOpportunistic) the one
// whose run has lasted least: a requeue throws away at most the work of
// the current run, and a job that started last has the least of it; then
// lower queues (larger numbers); in a queue, jobs Slurm
// may requeue before jobs it would have to kill (NoRequeue): a kill loses
// the run's work, so it is taken only when no requeueable job of that
// queue would do; then, with SpreadVictims, the jobs not preempted more
// than floor's least before those that were; then the lowest-ranked
// first. The simulator sorts its candidates with it, and the core numbers
// running jobs by it for Slurm, which takes victims in that order until
// the preemptor fits.
func (p Preemption) CompareVictims(floor *PreemptionFloor, a, b Victim) int {
	if a.Opportunistic != b.Opportunistic {
		if a.Opportunistic {
			return -1
		}
		return 1
	}
	if a.Opportunistic && !p.StrictOpportunistic && a.RunSeconds != b.RunSeconds {
		return cmp.Compare(a.RunSeconds, b.RunSeconds)
	}
	if a.Queue != b.Queue {
		return cmp.Compare(b.Queue, a.Queue)
	}
	if a.NoRequeue != b.NoRequeue {
		if a.NoRequeue {
			return 1
		}
		return -1
	}
	if p.SpreadVictims && floor != nil && !a.Opportunistic {
		if oa, ob := floor.above(a), floor.above(b); oa != ob {
			if oa {
				return 1
			}
			return -1
		}
	}
	return cmp.Compare(b.Rank, a.Rank)
}

// validate reports the preemption keys' problems through bad.
func (p Preemption) validate(bad func(key, format string, args ...any)) {
	if !finiteNonNegative(p.MinRun) {
		bad("preemption.min_run", "%v must be a finite number of seconds >= 0", p.MinRun)
	}
	if p.MaxPerJob < 0 {
		bad("preemption.max_per_job", "%d must be >= 0 (0: no limit)", p.MaxPerJob)
	}
	if p.QueueGap < 1 || p.QueueGap > MaxThresholds {
		bad("preemption.queue_gap", "%d must be between 1 and %d", p.QueueGap, MaxThresholds)
	}
}

// Preempts is Tiresias's preemption rule between queues alone: a job may
// requeue a running job only if the victim sits in a strictly lower queue
// (a larger number). Jobs of one queue never preempt each other, which is
// what keeps jobs with similar service from trading GPUs back and forth.
// Config.Preemption adds the costs (Decide).
func Preempts(preemptorQueue, victimQueue int) bool { return victimQueue > preemptorQueue }
