// Package gpushare is GPU sharing and per-job GPU use inside slurmctld:
// what the node agents report each Slurm job does with its GPUs, and what
// Lachesis does with it (issue 22, AntMan's classes and Gandiva's
// introspection; the rules are policy/sharing's, which the simulator
// applies too).
//
// Its flow, one method each (sharing.go):
//
//   - report use: ReportGPUUse folds a node agent's report (authenticated
//     and bounded by the listener) into each running job's summary
//     (gpuuse.go), under Sharing's own lock, never a pass's;
//   - judge at a pass: Judge is the core's pass's sharing stage. It fills
//     each job's answers (its AdminComment's GPU-use segment, a waiting
//     guest's reason) and each waiting guest's pair score, which the next
//     pass ranks by, and hands requeues and ExcNodeList updates to the
//     requeuer; its steps are reasons.go, gpuuse.go (observe),
//     memguard.go, introspect.go and exclude.go, in that order;
//   - convert at submit: ConvertToShards rewrites a quiet one-GPU job into
//     shards of one GPU, by sharing.ShardConvert on its user's history of
//     its model (shardconvert.go);
//   - flush to the ledger: Flush (the core's writer goroutine) saves what
//     changed, and Restore takes it back at start (Store names what it
//     needs of the ledger, checked against ledger.SQLite).
//
// The requeuer (requeuer.go, RunRequeuer) carries out what a pass decided
// about other users' jobs, requeues and ExcNodeList edits, through
// slurmcmd.Runner, the one runner of Slurm's commands, in a goroutine of
// its own, never under a lock. Nothing under slurmctld's locks touches
// disk or network.
package gpushare
