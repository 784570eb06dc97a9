// Package sharing is Lachesis's GPU sharing between two classes of jobs,
// after AntMan (OSDI'20) and Gandiva's introspection (OSDI'18): its pair
// table and the rules that both the simulator (sim/) and slurmctld's core
// apply, so what the evaluation measures is what the cluster runs.
//
// Jobs are guaranteed (the default) or opportunistic. An opportunistic job
// competes with every job by attained service for idle whole GPUs, and
// runs on a share of a GPU beside a guaranteed job whose measured speed it
// does not hurt. It never preempts anything, is the first victim of a
// guaranteed job of a better queue, and is promoted to guaranteed after
// Config.PromoteAfter of waiting (Config.PromoteNow). Under
// Config.StrictOpportunistic (AntMan's quota rule) it runs only on
// capacity guaranteed jobs leave, any guaranteed job takes it back, and it
// is promoted only at a pass where no guaranteed job waits.
//
// # The pair table
//
// Table maps an unordered pair of models to each one's speed when the two
// share one GPU, as a fraction of its speed alone. It is seeded from
// Gavel's measured co-location throughputs (ReadGavel) and overridden by
// what the node agent measures (Table.Measure): a measured entry is never
// replaced by a seed. Every entry is bounded (Limits): a model name's
// length, the number of entries, fractions in [0, MaxFraction]; NaN and
// infinities are refused. A fraction of 0 means the two did not run
// together at all (Gavel's out-of-memory pairs): such a pair is never
// packed.
//
// # The rules
//
//   - Choose: which opportunistic job goes beside a guaranteed one: the one
//     with the least predicted loss for the guaranteed job, never one
//     predicted above Config.MaxSlowdown, never a pair remembered as bad,
//     never one whose two jobs together would do no more than the
//     guaranteed job alone (Gains: their fractions sum to 1 or less).
//     An unmeasured pair is tried only when no measured one qualifies and
//     Config.TryUnmeasured allows it (Gandiva: try, measure, keep or revert).
//   - Revert: the guaranteed job's measured rate beside its neighbour
//     against its solo rate; a loss above MaxSlowdown requeues the
//     opportunistic job, and Table.MarkBad remembers the pair so it is not
//     packed again. RevertPair adds the opportunistic job's measured rate:
//     a pair that does not gain (Gains) is reverted too. JudgePair is the
//     two on one pair's measured rates, and Table.Learn what the table
//     takes from its verdict (introspect.go); in slurmctld Table.LearnBy,
//     for the users whose jobs were measured (Party: their mark reaches
//     other users' jobs only with Limits.Quorum independent parties, and
//     expires after Limits.MarkTTL; table.go).
//   - Promote: an opportunistic job that has waited PromoteAfter becomes
//     guaranteed; PromoteNow does it at the next pass (ranked by attained
//     service already, it keeps its place), or, under StrictOpportunistic,
//     only at a pass where no guaranteed job waits (AntMan upgrades when
//     the guaranteed quota has room).
//   - Move: a guest that has shared a GPU for MoveAfter is requeued to run
//     alone when a whole GPU stays idle (a shard allocation cannot grow).
//   - MemoryOver: the guests on a GPU hold more memory than the guaranteed
//     jobs there leave (the GPU's memory less their measured peak less
//     GuestMemoryHeadroomPct): a guest is requeued (memory.go).
//   - ShardConvert: a guaranteed job asking for one GPU whose user's last
//     jobs of its model left most of a GPU unused gets shards of one GPU
//     instead, so a guest fits beside it (shards.go; Slurm's only: the
//     simulator's guests share a GPU without shards).
//
// Who may preempt whom is not here: priority.Preemption.Decide and
// priority.CompareVictims hold it for slurmctld (policy/priority/opportunistic.go:
// opportunistic jobs never preempt and are the first victims of a
// guaranteed job of a better queue, of any under
// StrictOpportunistic), and the simulator's sharing mode takes
// opportunistic jobs back by the same rule before its policy preempts
// anything.
//
// # Wiring it into a scheduler
//
// Load once: Config.Validate, and a Table from ReadGavel (the seeds) kept
// under the caller's lock. At each pass, in this order:
//
//  1. For each pair that ran since the last pass, the guaranteed job's
//     measured rate beside its guest and alone, and the guest's where it
//     was measured alone (iterations/s from its progress reports, else GPU
//     utilisation): Config.JudgePair, then Table.Learn of the verdict (a
//     revert marks the pair bad, a kept pair's fractions replace the
//     seed); requeue the guest of a revert.
//  2. Config.PromoteNow each waiting opportunistic job on its total
//     pending time and the guaranteed jobs waiting; a promoted job is
//     guaranteed from then on, in its place (under StrictOpportunistic
//     queued as a job submitted then).
//  3. Place jobs in the policy's order, opportunistic ones among them
//     (under StrictOpportunistic, guaranteed jobs only): an opportunistic
//     job takes only idle GPUs, never preempts, and is the first victim of
//     a guaranteed job of a better level (queue)
//     (policy/priority/opportunistic.go).
//  4. Place opportunistic jobs: idle whole GPUs left first, then for each
//     one-GPU guaranteed job whose model's Table.Usage leaves room,
//     Config.Choose among the waiting models; Config.Move a guest that
//     has shared long enough when a whole GPU stays idle.
//
// The simulator (sim/sharing.go) is this loop; docs/evaluation section 8
// measures it. In slurmctld, the pass's sharing stage
// (internal/controller/gpushare) applies step 1 at every pass
// (introspect.go: pairs from the node agents' GPU-use reports, the same
// JudgePair and Learn, the requeue outside slurmctld's locks), and
// MemoryOver before it (memguard.go); steps 2 and 3 are
// policy/priority/opportunistic.go's, and step 4 is Slurm's own scheduling
// of the opportunistic partition, steered with Choose's rule for each pair
// (Config.Fits; gpushare/exclude.go): a waiting guest is kept off nodes
// where it could only land beside a host it does not fit, and, under
// StrictOpportunistic, the best predicted pair ranks first. The equivalence test of
// internal/controller/core replays a simulated history into slurmctld's
// core and finds the same requeues, bad pairs and promotions. Model names
// meet through ModelKey: the table keys every entry by it.
//
// The package is pure Go without I/O (it parses from an io.Reader), like
// policy/priority/, and builds with CGO_ENABLED=0.
package sharing
