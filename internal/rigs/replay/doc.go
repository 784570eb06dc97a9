// Package replay holds the simulator against the real thing (issue 23): a
// job list replayed on the loopback Slurm cluster, time-compressed, and the
// same jobs through the simulator (package sim) on the same shape with the
// same scaled costs and policy config, side by side.
//
// Time compression by a factor C divides every time of the trace and every
// time-valued setting by C: durations, inter-arrival times, queue
// thresholds (GPU-seconds), min_run, sibling_window, max_age, the fair-share
// half-life, fallback_after and pass_interval. What cannot be scaled is
// kept and given to the simulator as it is on the cluster, so both sides
// run the same experiment (Scaled says which):
//
//   - Slurm's requeue hold is cred_expire + 1 s and 22.05 refuses
//     cred_expire below 5, so a requeued job waits 6 s of replay time
//     (scripts/cluster.sh sets 5): 6·C seconds of trace time, 120 s at
//     C = 20, Slurm's default hold (121 s) there.
//
//   - pass_interval is whole seconds, at least 1 (the plugin's timer).
//
//   - Durations are whole seconds, at least 1: scripts/demo-train.sh, the
//     checkpointing sleeper every job runs, advances and saves its progress
//     once a second, so a requeued job also loses up to a second of work.
//
//   - The 2D-Gittins index uses the bundled seed distribution of GPU-time,
//     which is in unscaled GPU-seconds, throughout (GittinsMinHistory);
//     the simulator is given the same seed.
//
//   - Slurm's own latencies do not scale: its scheduling round (a second)
//     and each run's launch are given to the simulator as they are
//     (SimCosts.SchedulerTick, LaunchOverhead).
//
//   - One user submits every job, so the core's service inheritance is
//     turned off (the simulator has none): see Scale.
//
// Synergy and Proportional replay the sizings: each job trains one of a
// few models (ModelOf), its sleeper runs at the speed its allocation buys,
// and the simulator is given the same speed tables (SimProfiles).
//
// The cluster's side is read from Slurm's own records, slurmctld's log:
// each job's submission, every start (main scheduler or backfill), every
// requeue by preemption and its end. The simulator is then run on the
// submission times Slurm recorded (relative to the first), so the harness's
// own submission jitter is not counted as a difference.
package replay
