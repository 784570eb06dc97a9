package priority

import "errors"

// Mode selects how jobs are ordered inside one queue.
type Mode string

const (
	// ModeLAS orders a queue FIFO by the time each job entered it
	// (discretized two-dimensional least-attained-service, "2D-LAS").
	ModeLAS Mode = "las"
	// ModeGittins orders a queue by the 2D-Gittins index of each job's
	// attained service, highest first.
	ModeGittins Mode = "gittins"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid tiresias config")

// Weights multiply the normalised factors (each in [0,1]) that make up a
// job's Slurm priority. The defaults make the Tiresias factor dominate.
type Weights struct {
	Tiresias  float64
	Age       float64
	Partition float64
	QOS       float64
}

// Config is the policy's whole configuration. It is validated once, when it
// is loaded, never on the hot path.
type Config struct {
	Mode Mode
	// Thresholds are the queue boundaries in GPU-seconds, strictly
	// ascending; K = len(Thresholds)+1 queues. A job whose queue service
	// is >= Thresholds[i] is in queue i+1 or lower.
	Thresholds []float64
	// ThresholdQuantiles, when set, put the queue boundaries at these
	// quantiles (each in (0,1), ascending) of the GPU-time distribution the
	// Ranker is given: the cluster's own completed jobs once it has enough
	// history, the bundled seed before. The queues then follow the
	// workload; Thresholds is used when it is empty (the admin's fixed
	// list) or when no distribution is given. Quantiles that give the same
	// GPU-time are merged, so K may be smaller than len+1.
	ThresholdQuantiles []float64
	// PromoteKnob: a pending job in queue > 0 that has waited at least
	// PromoteKnob × its last run time goes back to queue 0. 0 disables it.
	PromoteKnob float64
	Weights     Weights
	// MaxAge is the wait (seconds) at which the age factor reaches 1,
	// like Slurm's PriorityMaxAge.
	MaxAge float64
	// FairShare between accounts (fairshare.go). The zero value is off;
	// when Enabled it is validated with the rest.
	FairShare FairShare
	// Preemption says when a preemption pays for its cost (preempt.go).
	Preemption Preemption
	// EffectiveService weights attained service by the speed of the GPU
	// type each run holds (speed.go): service is then reference-GPU-
	// seconds of work. Off, service is plain GPU-seconds.
	EffectiveService bool
	// SiblingWindow, in seconds, groups jobs of one user, account and GPU
	// count submitted at most this far apart into a sweep whose completed
	// members set the others' Gittins index (siblings.go). 0 turns sibling
	// prediction off; LAS mode ignores it.
	SiblingWindow float64
	// InheritService: a job that arrives (is submitted, or can first
	// run) during or within SiblingWindow after the run of an ended job of
	// the same user, account and GPU count starts with that job's queue
	// service (inherit.go), so cancel and resubmit, or a chain of held or
	// dependent copies, does not reset it. Off with SiblingWindow 0 too.
	InheritService bool
	// Opportunistic is AntMan's opportunistic class (opportunistic.go).
	// The zero value is off.
	Opportunistic Opportunistic
	// Quotas: some account holds a guaranteed quota (issue 35), so the
	// ranker lays the jobs within their quotas above every borrower
	// (Job.Quota, quota.go). Off, Job.Quota is ignored.
	Quotas bool
}

// State is a job's state as the policy sees it.
type State uint8

const (
	Pending State = iota
	Running
)

// Job is the policy's view of one job in a pass. All times are Unix seconds.
type Job struct {
	ID    uint32
	State State
	GPUs  uint32
	// SubmitTime is the job's first submission (kept across requeues by the
	// ledger); it is the second tie-break after queue-entry time.
	SubmitTime int64
	// EligibleTime feeds the age factor.
	EligibleTime int64
	// Service is the attained service (GPU-seconds) that places the job in a
	// queue: everything since its last promotion.
	Service float64
	// Queue and QueueEntry are what the previous pass decided (0 and the
	// submit time for a job never ranked before).
	Queue      int
	QueueEntry int64
	// LastRun is the length in seconds of the job's most recent run (0 if
	// it never ran); WaitingSince is when it last became pending.
	LastRun      float64
	WaitingSince int64
	// Ran says the job itself has run (a run begun): its service is not
	// only what it inherited (inherit.go). The sweep index applies only
	// to jobs that have run.
	Ran bool
	// Partition and QOS are Slurm's normalised factors in [0,1]; Nice is
	// Slurm's nice value (negative raises priority).
	Partition float64
	QOS       float64
	Nice      int32
	// FairShare is the fair-share factor of the job's account in (0,1]
	// (FairShareFactors); jobs of accounts over their share (< ½) lose
	// ties inside a queue when Config.FairShare is enabled.
	FairShare float64
	// Siblings is the GPU-time of the job's sweep members that have
	// ended (Siblings.Of), nil for none. In Gittins mode the index is
	// taken against it while the job's service is below the longest
	// (siblings.go).
	Siblings *SweepHistory
	// Held: a pending job that cannot start whatever the cluster frees
	// (held by its user or an admin). It holds no opportunistic upgrade
	// back (opportunistic.go).
	Held bool
	// Deferred: a pending job that is not held but cannot start yet: it
	// waits on a dependency or its begin time. It is ranked last in its
	// queue (order.go), where a job just submitted stands, so that when
	// it is let go between passes it does not overtake the jobs waiting
	// in its queue with the place it held while it could not run.
	Deferred bool
	// Opportunistic: the job is in the opportunistic class and has not
	// been upgraded (opportunistic.go). Ignored unless
	// Config.Opportunistic.Enabled.
	Opportunistic bool
	// Pair is how well a waiting opportunistic job would pair with the
	// guaranteed jobs whose GPUs it could share: the best predicted speed,
	// as a fraction of alone, of a guaranteed neighbour beside it (the
	// pair table, sharing.Config.Fits), 0 when nothing is predicted. In
	// its band, a better pair goes first (order.go). Ignored for other
	// jobs.
	Pair float64
	// Quota is the job's standing against its account's quota
	// (quota.go); read only with Config.Quotas.
	Quota QuotaClass
}

// Factors are the components of a priority, kept so operators can see why a
// job ranked where it did (sprio shows them).
type Factors struct {
	Tiresias float64 // queue band + position in the queue, in (0,1) from Rank, [0,1) from Standing
	Gittins  float64 // 2D-Gittins index (0 in LAS mode)
	// SiblingSamples is how many completed siblings the Gittins index was
	// taken against; 0 when the cluster-wide distribution set it.
	SiblingSamples int
	Age            float64
	Partition      float64
	QOS            float64
	Nice           int32
	FairShare      float64 // the account's fair-share factor, as given in Job
	Pair           float64 // a waiting opportunistic job's pair score, as given in Job (0 for others)
}

// Result is the policy's decision for one job.
type Result struct {
	ID         uint32
	Queue      int
	QueueEntry int64
	// Promoted is set when starvation promotion moved the job to queue 0
	// in this pass; the caller resets the job's queue-service counter.
	Promoted bool
	// Opportunistic: the job was ranked in the opportunistic class (it is
	// opportunistic and was not upgraded in this pass). Upgraded: it was
	// upgraded to guaranteed in this pass (AntMan's upgrade); the caller
	// keeps that for good (Account.Apply).
	Opportunistic bool
	Upgraded      bool
	Rank          int // position in the total order, 0 first
	Factors       Factors
	Priority      uint32
}
