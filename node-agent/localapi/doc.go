// Package localapi is the node agent's unix socket, through which the
// lachesis-profiler CLI on the same node asks for profiles.
//
// The protocol is one JSON request per connection, answered by a stream of
// JSON events (one per line): progress while the sweep runs, then a result
// or an error. Who asks is not taken from the request but from the socket
// itself (SO_PEERCRED), so a user cannot ask for a profile to run as anyone
// else; closing the connection (Ctrl-C in the CLI) cancels the run.
//
// Any local user may connect (the socket is mode 0666): the agent runs a
// workload as the user who asked for it, and refuses root unless
// configured otherwise. Each connection is served on its own goroutine with
// read and write deadlines, so a status request never waits behind a
// sweep; one uid may hold at most a few connections at a time (queued
// profiles included), so one user cannot lock the others out.
//
// Besides the CLI's requests, slurmstepd reports job ends here (OpJobEnd,
// root only) and a job's training loop its iteration count (OpProgress,
// progress.go), which names no job: the handler derives it from the caller.
package localapi
