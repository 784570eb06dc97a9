// Package nodeagent is the root of lachesis-node-agent, the daemon that runs
// on every compute node (cmd/lachesis-node-agent wires it):
//
//   - config: the agent's YAML (internal/util/yamlconf), parsed from an
//     io.Reader and validated once at start;
//   - spool: its own SQLite file, where every measurement and every profile
//     is written before anything is sent;
//   - deliver: sends spooled profiles to the Lachesis core in slurmctld
//     (length-framed msgpack with munge credentials, package wire) and
//     retries with backoff until each is acknowledged;
//   - localapi: the unix socket the lachesis-profiler CLI talks to, which
//     learns the caller's uid from SO_PEERCRED;
//   - agent: ties them together: runs profiling sweeps as the requesting
//     user, never as root, and reports GPU telemetry (node-agent/telemetry);
//   - procjob: a process's Slurm job on this node, from the kernel's view
//     of it (/proc: its root slurmstepd, its job_<id> cgroups), for
//     requests on the socket and for GPU processes; the profiler reads
//     /proc through it too;
//   - jobprogress: turns the iteration counts jobs report on the socket into
//     iterations per second per job.
//
// The lachesis-profiler CLI draws a run's progress itself, with the
// terminal pieces of internal/util/progressbar.
package nodeagent
