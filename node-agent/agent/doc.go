// Package agent is the node agent itself: it serves profile requests from
// the lachesis-profiler CLI (package localapi), runs each sweep as the user
// who asked (never as root, unless the configuration allows it), writes
// every measurement and the finished profile to the spool, hands the
// profile to the deliverer, and reports GPU telemetry.
//
// Whatever it opens for a request (the dataset, the command on the user's
// PATH) it opens as the user too (profiler.AsUser). One sweep runs at a
// time; the rest queue round-robin across users, each shown its place, and
// max_point_seconds and max_sweep_seconds bound how long one holds the
// node.
//
// Every dependency with side effects — the profiler, munge, NVML, user
// lookups — comes in through Deps, so the agent is tested with fakes and
// wired for real by cmd/lachesis-node-agent.
package agent
