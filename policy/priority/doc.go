// Package priority is Lachesis's scheduling policy: Tiresias (NSDI'19)
// expressed as Slurm job priorities. It is pure Go with no I/O, so the same
// code runs inside slurmctld, in the trace simulator and in benchmarks.
//
// # Queues
//
// GPU jobs rarely come with an honest length, so Tiresias ranks them by what
// is known: attained service, GPUs × seconds run so far. Jobs fall into K
// queues by that service; Q0 is the best. A job starts in Q0 and moves down
// each time its service reaches the next threshold, so short jobs finish
// before long ones without anyone predicting which is which. Queues are
// discrete rather than a continuous LAS order to stop jobs with similar
// service from preempting each other back and forth.
//
// # Jobs without GPUs
//
// A job without GPUs is charged in GPU-equivalents (ChargedGPUs): its CPUs
// over its node's CPUs per GPU, rounded up, at least 1. Otherwise it would
// never gain service and would sit in Q0 above every demoted GPU job for
// as long as it runs.
//
// # Effective service on several GPU types
//
// With Config.EffectiveService, a run's service grows at
// EffectiveRate(GPUs, speed) per second, where speed is the model's speed
// on the GPU type the run holds, relative to a reference GPU of speed 1
// (Speeds: profiled throughput ratio, else the admin's per-model table,
// else the type's default). A job on GPUs twice as fast then reaches each
// threshold in half the time, having done the same work. The speed is
// fixed when the run opens (Account.SetRunSpeed); the simulator's
// effective policy weights its runs the same way.
//
// # Order inside a queue
//
// In LAS mode a queue is FIFO by the time each job entered it, then by
// submit time, then by job id, which makes the order total. In Gittins mode
// the jobs of a queue are first ordered by their 2D-Gittins index
// G(a, Δ) = P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a], where S is the
// GPU-time distribution of completed jobs, a the job's service and Δ the
// queue's upper threshold (unbounded for the last queue). The index is the
// chance of finishing within Δ per unit of service spent; it rewards jobs
// that history says are about to end, which FIFO cannot see. The history
// comes from the cluster's ledger, seeded with a bundled distribution (see
// SeedDistribution) until the cluster has its own.
//
// # Sweeps
//
// Jobs of one user, account and GPU count submitted close together
// (Config.SiblingWindow) are one sweep (Siblings): a hyperparameter search
// whose members run for similar times. Once some have ended, the index of
// the others that have run is taken against the GPU-time of those that
// ended instead of the cluster's history, as long as the job's service is
// below the longest of them (a job that has not run keeps the cluster's
// index, so a throw-away job cannot lift a sweep's waiting members): a job its sweep says is about to end goes first in its queue,
// instead of behind fresh arrivals. Only the ended members' GPU-time is
// used, never a job's own length, and sweeps only reorder jobs inside a
// queue. Factors.SiblingSamples says when a sweep set the index.
//
// # Starvation promotion
//
// Demotion alone can starve a long job behind a stream of short ones. A
// pending job below Q0 that has waited at least PromoteKnob times the length
// of its last run goes back to Q0, and its service counts from zero again;
// the Result says Promoted so the caller can reset its ledger counter.
// A knob of 0 turns this off, as in the reference simulator.
//
// # Fair share between accounts
//
// Inside a queue, jobs of accounts at or under their share of decayed
// GPU-service go before jobs of accounts over it (see fairshare.go for the
// rule and why it is a tie-break and not a weight). The caller gives each
// Job its account's factor (FairShareFactors); Config.FairShare turns the
// tie-break on.
//
// # Preemption
//
// Preemption.Decide says whether a waiting job may requeue a running one
// (a lower queue, a run of at least min_run, the per-job budget, promoted
// jobs only when allowed); Preemption.CompareVictims says which of the
// allowed ones go first: lower queues, then (spread_victims) the jobs of a
// queue requeued no more than its least-requeued running job, then the
// lowest-ranked. The simulator sorts its candidates with it and the core
// hands Slurm the same order, so requeues spread over the long jobs
// instead of piling on the one that ranks last.
//
// # From order to a 32-bit priority
//
// Slurm schedules and preempts by a single 32-bit priority, so the order is
// turned into a Tiresias factor: queue q owns the open band
// ((K−1−q)/K, (K−q)/K) and a job's place inside the queue fixes where in the
// band it falls. A job enqueued at submission, before any pass, gets the
// band's lower edge (Ranker.Standing), below the jobs already in its
// queue. That factor is weighted together with Slurm-style age, partition
// and QOS factors (each in [0, 1]), minus the job's nice value,
// and clamped to [1, 0xFFFFFFFE], because 0 means "held" to Slurm.
//
// By default only the Tiresias weight is non-zero, so the priority order is
// exactly the policy's order: a job in a better queue always outranks one in
// a worse queue, which is what makes Tiresias effective, and preemption
// (which compares priorities) follows the queues. Admins who add age,
// partition or QOS weight trade some of that for Slurm's usual fairness
// knobs: jobs near a band's edge can then cross into the neighbouring
// queue's priorities, and weights approaching the band width (Tiresias/K)
// let them cross whole queues.
package priority
