package core

import "github.com/lachesis-sched/lachesis/policy/priority"

// Decision is what the core last decided for a job: its priority and every
// component of it, so sprio can explain it.
type Decision struct {
	Priority     uint32
	Queue        int
	Service      float64 // attained GPU-seconds across all runs
	QueueService float64 // the part of Service that places the job in a queue
	Factors      priority.Factors
	// Weighted contributions; Tiresias+Age+Partition+QOS-Nice = Priority
	// (before rounding and clamping).
	WeightedTiresias  float64
	WeightedAge       float64
	WeightedPartition float64
	WeightedQOS       float64
	// Marker, when not "", is to be saved as Lachesis's part of the job's
	// SystemComment (restore.go): it changed since Slurm last had it.
	Marker string
	// Blocked, set by a pass for a waiting job whose preemption the rule
	// refused lately for a cost (min_run, max_per_job, queue_gap), says
	// so, and for a waiting opportunistic job, that it waits for idle GPUs
	// and when it is upgraded; the plugin shows it as the job's reason
	// (blocked.go). It starts with reasontext.WaitingPrefix.
	Blocked string
	// GPUUse, set by a pass for a running job whose GPU-use summary
	// changed, is its new GPU-use segment (gpushare/gpuuse.go, starting
	// with gpushare.GPUUsePrefix), to replace Lachesis's segment of its
	// AdminComment (lachesis_prio_t.usage).
	GPUUse string
	// Quota, set by a pass for a GPU job whose quota state changed, is its
	// new quota segment (quotaplace.go, starting with QuotaSegmentPrefix),
	// to replace Lachesis's quota segment of its AdminComment
	// (lachesis_prio_t.quota).
	Quota string
	// Opportunistic: the job is ranked in the opportunistic class
	// (policy/priority/opportunistic.go): it preempts nothing and is the first
	// victim of every guaranteed job.
	Opportunistic bool
}

func decide(w priority.Weights, r priority.Result, service, queueService float64) Decision {
	return Decision{
		Priority:          r.Priority,
		Queue:             r.Queue,
		Service:           service,
		QueueService:      queueService,
		Factors:           r.Factors,
		WeightedTiresias:  w.Tiresias * r.Factors.Tiresias,
		WeightedAge:       w.Age * r.Factors.Age,
		WeightedPartition: w.Partition * r.Factors.Partition,
		WeightedQOS:       w.QOS * r.Factors.QOS,
		Opportunistic:     r.Opportunistic,
	}
}
