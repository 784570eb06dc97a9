package priority

// Guaranteed quotas (issue 35; the rules of quotas and cells are
// policy/quota and policy/cells): what the ranker and the preemption rule
// need of them. A job's QuotaClass is QuotaOff wherever no quota is
// configured, and then every answer here is today's, so a cluster
// without quotas ranks and preempts exactly as before.

// QuotaClass is a job's standing against its account's quota.
type QuotaClass uint8

const (
	// QuotaOff: no quota is configured (the zero value).
	QuotaOff QuotaClass = iota
	// QuotaWithin: the job fits within its account's quota (quota.Within,
	// in cells where cells are bound): guaranteed.
	QuotaWithin
	// QuotaBorrowing: beyond its account's quota, or of an account
	// without one: it runs on lent GPUs and is the first to yield.
	QuotaBorrowing
)

// QuotaOrder orders two jobs by quota class, before the queues: jobs
// within their quota first, ordered by Tiresias among themselves; then the
// borrowers, ordered as today (queues, fair share). 0 when either is
// QuotaOff.
func QuotaOrder(a, b QuotaClass) int {
	if a == QuotaOff || b == QuotaOff || a == b {
		return 0
	}
	if a == QuotaWithin {
		return -1
	}
	return 1
}

// QuotaCandidate is a preemption candidate with its quota standing.
type QuotaCandidate struct {
	Candidate
	Account string
	Quota   QuotaClass
}

// DecideQuota is the preemption rule with quotas. A reclaim (a job
// within its account's quota preempting another account's borrower) is
// allowed whatever either's queue, the victim's run and its preemptions,
// since the victim's GPUs were lent, not given (as an opportunistic
// victim's); which borrowers a reclaim takes, and how many per pass, is
// quota.Choose's. A job within its own quota is never preempted by
// another account's job. Everything else, and everything when either
// side is QuotaOff, is Decide's, so the opportunistic class, tiers and
// arrays keep their rules.
func (p Preemption) DecideQuota(preemptor, victim QuotaCandidate) Verdict {
	if preemptor.Quota == QuotaOff || victim.Quota == QuotaOff || preemptor.Account == victim.Account {
		return p.Decide(preemptor.Candidate, victim.Candidate)
	}
	switch {
	case preemptor.Opportunistic:
		return DeniedOpportunistic
	case victim.Tier > preemptor.Tier:
		return DeniedTier
	case preemptor.Array != 0 && preemptor.Array == victim.Array:
		return DeniedSameArray
	case victim.Quota == QuotaWithin:
		return DeniedWithinQuota
	case preemptor.Quota == QuotaWithin:
		return Allowed
	}
	return p.Decide(preemptor.Candidate, victim.Candidate)
}
