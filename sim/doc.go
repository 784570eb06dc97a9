// Package sim is Lachesis's trace-driven simulator: it replays a job trace
// on a simulated GPU cluster under one scheduling policy and reports job
// completion times (JCT), so policies can be compared on the same trace,
// and a site can ask what Lachesis would have done with its own history
// before installing it.
//
// # Inputs
//
// A Trace is a list of Jobs (ID, submit time, GPUs, duration at the
// GPU-proportional share, optional model). Package sim/trace defines them
// and reads them without the engine: trace.Load reads four formats, the
// Philly job table, the Tiresias simulator's job file, Lachesis's plain
// job list (trace.ReadJobList) and Slurm accounting (trace.ReadSacct,
// `sacct --parsable2` with the fields in trace.SacctFormat, requeued runs
// folded into one job); it also generates Synergy's synthetic job lists.
// Trace.Select cuts a time window, virtual clusters or a number of jobs out
// of a trace, and scales durations.
//
// # Cluster and placement
//
// The cluster is Shape.Nodes identical nodes of GPUs, CPUs and memory, or
// with Shape.GPUCountOnly a single pool of GPUs (the Tiresias reference
// simulator's "count" mode). Placement is consolidated: a job of at most a
// node's GPUs runs on one node, the one where it runs fastest, then the
// fullest that fits (best fit), then the lowest index; a larger job takes
// ⌊G/n⌋ whole free nodes plus one node for the rest.
//
// # Allocation and speed
//
// AllocProportional gives a job its GPUs' share of the node's CPUs and
// memory. AllocSynergy gives profiled jobs their best-case demand where the
// node can spare it (profiler/sensitivity's Allocator, the same code the
// job_submit plugin uses). A job's speed is its model's throughput at its
// per-GPU allocation, relative to the proportional share of Synergy's
// servers (3 CPUs, 62.5 GB per GPU); a multi-node job runs at its slowest
// node's speed. Trace durations are taken to be at speed 1. Jobs get
// models by a seeded rule (ModelRule); unprofiled jobs run at speed 1.
// Allocations are fixed for a run, as in Slurm: a running job is never
// resized. AllocStart is what slurmctld runs: each job asks for its best
// case and starts with it where that is free, else waits for it up to
// Config.FallbackAfter and is then lowered to what a node with its GPUs
// free spares (synergy.Config.Waits and synergy.FitOnNode, the core's
// rules).
//
// # Heterogeneous clusters
//
// With Config.Hetero the nodes form equal groups of GPU types (node n has
// type n mod the number of types) and speeds come from Gavel's measured
// throughputs (GavelTable): a job's speed on a type and placement
// (consolidated on the fewest nodes, or spread) relative to the reference
// type consolidated, on which the trace's durations are taken to be
// measured. Jobs get Gavel models by a seeded rule (GavelAssign). The
// type-agnostic policy counts service in GPU-seconds and takes the first
// type with room in a per-job rotation; the effective-throughput policy
// counts GPU-seconds × speed and takes the type where the job runs
// fastest now. With consolidation, a job whose spread speed on a type is
// well below its consolidated one starts there only consolidated.
//
// # Time and passes
//
// The engine jumps from event to event (arrivals, completions, policy
// passes), never second by second, so a run costs O(events × log) plus the
// passes' work. A pass runs at every arrival and completion (Slurm
// schedules on those events) and when the policy's order may change on its
// own: a running job crossing a Tiresias queue threshold, or a waiting job
// becoming due for starvation promotion. Those are acted on at the next
// multiple of Config.PassInterval (the plugin's pass interval), or at the
// next whole second with an interval of 0, like the reference simulator.
// Config.SchedulerTick and Config.LaunchOverhead add slurmctld's
// once-a-second scheduling round and a run's launch time, and
// Config.BackfillInterval its two schedulers: the main scheduler stops at
// the first job that can neither start nor preempt, the jobs behind it
// start from sched/backfill's cycles, and a job backfill starts by
// preempting holds its node for the rest of the cycle and starts at a
// later pass. All three are 0 by default (a second is nothing against
// hour-long jobs); the time-compressed replay (internal/rigs/replay) sets
// them.
//
// # Policies
//
// A Policy is an Orderer (the order of active jobs, and for preemptive
// policies a level per job) plus two rules shared by all: whether a pending
// job that does not fit blocks those behind it (strict FIFO) or is skipped,
// and whether it may preempt running jobs of a strictly larger level. Each
// pass walks the order and starts every pending job that fits; a pending
// job that does not fit may preempt: on the node where that costs the
// fewest victims, it preempts eligible jobs in the policy's victim order
// (lowest-ranked first; las and gittins use priority.Preemption's
// CompareVictims) until it fits, then spares any of them it does not need
// after all. A preempted
// job is requeued with its progress kept (Tiresias assumes checkpoints) and
// pays Config.RestartPenalty when it runs again.
//
// The policies are fifo, fifo-skip, age (Slurm multifactor), srtf (the
// clairvoyant reference with known durations), and las and gittins, which
// call priority.Ranker itself: the simulator keeps each job's attained
// service (GPUs × seconds run, across requeues), queue, queue entry, last
// run and waiting time exactly as Lachesis's core keeps its ledger, and
// Lachesis's rule that preemption crosses queues (a job preempts only jobs
// in a strictly lower queue) is the level rule with the queue as level.
//
// # Fair share
//
// With Tiresias.FairShare.Enabled (off by default here, unlike in
// slurmctld), las and gittins add fair share between accounts, a job's
// account being its virtual cluster (Job.Cluster): the orderer keeps a
// priority.UsageTable, the core's own bookkeeping, decays it and charges
// each account the service its jobs attained since the last pass (a job
// that completed in between, at the next pass), and hands the factors to
// the Ranker with the jobs. Result.Accounts has each account's jobs, GPU
// time, share of the GPU time held while jobs waited, and average JCT.
//
// # GPU sharing
//
// With Config.Sharing (SharingConfig), jobs are guaranteed or
// opportunistic (package sharing's rules, the ones slurmctld applies):
// opportunistic jobs stand in the policy's order by attained service (out
// of it under Rules.StrictOpportunistic), run on idle whole GPUs and as
// guests on the GPU of a one-GPU guaranteed job whose model leaves room,
// at the pair table's fractions of their solo speeds (Gavel's co-location
// measurements), are taken back first by a guaranteed job of their level
// or a better one (any, strict) and never preempt, are requeued when their
// host is measured to lose more than max_slowdown, and are promoted after
// promote_after of waiting. Off, every job runs as
// without sharing and only the report (Result.Sharing: utilisation in the
// window of submissions, each class's JCT and time to first start,
// requeues by cause) is added.
//
// # Results
//
// JCT is finish − submit. Summary has the average, median, p95 and p99
// (nearest rank) JCT, the makespan (first submission to last completion),
// GPU utilisation (GPU-seconds held, restart penalties included, over GPUs
// × makespan), preemptions, promotions and the average speed. Results are
// a pure function of the trace and the Config: the seed only draws models.
// Package sim/report writes them (tables, CSV, JSON, Markdown, CDF charts).
package sim
