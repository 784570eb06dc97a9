package priority

import (
	"errors"
	"math"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// AntMan's two job classes (Xiao et al., OSDI'20). A guaranteed job is
// what every job was before: ranked by Tiresias, preempted only by the
// rule in preempt.go. An opportunistic job is one its owner marked as
// one that may be evicted; by default (sharing.Config.StrictOpportunistic
// off):
//
//   - it competes with every job by attained service: it is ranked in
//     the same Tiresias queues as guaranteed jobs, so the short jobs
//     attained-service ranking runs first still run first when marked
//     opportunistic (the class is about who may be evicted, not about
//     waiting behind every long guaranteed job);
//   - it never preempts anything (DeniedOpportunistic);
//   - it is the first victim of a guaranteed job of a better queue
//     (CompareVictims, Decide): neither min_run, max_per_job nor
//     queue_gap shields it, but a guaranteed job of its own queue or a
//     worse one, which attained-service ranking puts no earlier, does not
//     evict it (within a queue that evicted the same short jobs again at
//     every arrival);
//     of opportunistic victims, the one whose run has lasted least goes
//     first, so an eviction throws away as little work as it can;
//   - after waiting Opportunistic.Rules.PromoteAfter seconds it is
//     upgraded to guaranteed for good (Result.Upgraded, Account.Upgraded)
//     at the next pass, guaranteed jobs waiting or not: the upgrade keeps
//     its place in the order and only ends its exposure to eviction.
//
// With StrictOpportunistic (AntMan's quota rule, this project's first
// one) the class is a second set of Tiresias queues, all below the
// guaranteed ones (bands); any guaranteed job evicts it whatever either's
// queue; and it is upgraded only at a pass where no guaranteed GPU job
// waits (waitsGuaranteed), entering the back of its queue. That starved
// the class in busy clusters (docs/evaluation section 8).
//
// Which jobs are opportunistic is the caller's to say (Job.Opportunistic:
// the core, from the job's Slurm partition; the simulator, from its job
// list); the rules here are the same for both.

// Opportunistic configures the opportunistic class. The zero value is off:
// no job is opportunistic, and ranking is what it was without the class.
type Opportunistic struct {
	// Enabled says some jobs may be opportunistic: the ranker then keeps
	// a band of queues below the guaranteed ones for them.
	Enabled bool
	// Rules are the sharing rules (lachesis.yaml's sharing section, built
	// once by the controller's config). The ranker reads PromoteAfter:
	// how long, in seconds, an opportunistic job may wait (since it last
	// became pending) before it is upgraded to guaranteed; 0 never
	// upgrades.
	Rules sharing.Config
}

// MaxPromoteAfter bounds sharing.promote_after: a year of waiting is no
// bound on starvation, so more is a typo.
const MaxPromoteAfter = 365 * 24 * 3600

// Validate reports the class's problems; each error wraps
// ErrInvalidConfig and names its key relative to lachesis.yaml's sharing
// section (like FairShare.Validate).
func (o Opportunistic) Validate() error {
	var errs []error
	if p := o.Rules.PromoteAfter; !(p >= 0) || p > MaxPromoteAfter || math.IsInf(p, 0) {
		errs = append(errs, configerr.New(ErrInvalidConfig, "promote_after",
			"%v must be between 0 (never) and %d seconds", p, MaxPromoteAfter))
	}
	return errors.Join(errs...)
}

// upgrades is AntMan's upgrade: an opportunistic job that has waited
// PromoteAfter since it last became pending becomes guaranteed; with
// StrictOpportunistic only at a pass where no guaranteed GPU job waits
// (guaranteedWaiting counts them). The rule is the simulator's
// (sharing.Config.PromoteNow).
func (o Opportunistic) upgrades(now int64, job *Job, guaranteedWaiting int) bool {
	return o.Enabled && job.Opportunistic && job.State == Pending && o.Rules.PromoteAfter > 0 &&
		o.Rules.PromoteNow(float64(now-job.WaitingSince), guaranteedWaiting)
}

// waitsGuaranteed says whether job is a guaranteed GPU job waiting to
// start now: what holds opportunistic jobs' upgrades back under
// StrictOpportunistic (upgrades). A
// held job, or one whose begin time is still ahead, waits for nothing the
// cluster could give it, so it holds no upgrade back.
func (o Opportunistic) waitsGuaranteed(now int64, job *Job) bool {
	return job.State == Pending && job.GPUs > 0 && !job.Held && job.EligibleTime <= now &&
		!(o.Enabled && job.Opportunistic)
}

// strict says the class is on under StrictOpportunistic: its own band of
// queues below the guaranteed ones.
func (o Opportunistic) strict() bool { return o.Enabled && o.Rules.StrictOpportunistic }

// bands is how many priority bands the ranker lays out: one per Tiresias
// queue, twice that under StrictOpportunistic (the opportunistic queues
// below all of the guaranteed ones).
//
// With quotas (Config.Quotas) every band is laid out twice: the jobs
// within their accounts' quotas (and those QuotaOff) in the upper half,
// the borrowers below all of them (quota.go).
func (r *Ranker) bands() int {
	n := r.cfg.Queues()
	if r.cfg.Opportunistic.strict() {
		n *= 2
	}
	if r.cfg.Quotas {
		n *= 2
	}
	return n
}

// bandOf is the band of a job in Tiresias queue q: q, but K+q for an
// opportunistic one under StrictOpportunistic; with quotas a borrower's
// band is that plus the bands of the within-quota half.
func (r *Ranker) bandOf(q int, opportunistic bool, class QuotaClass) int {
	b := q
	if opportunistic && r.cfg.Opportunistic.strict() {
		b += r.cfg.Queues()
	}
	if r.cfg.Quotas && class == QuotaBorrowing {
		b += r.bands() / 2
	}
	return b
}
