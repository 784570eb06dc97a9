// Package metricsrv serves a private Prometheus registry on /metrics, for
// the core inside slurmctld and for the node agent. The listener is opened
// by the caller's Open (a bad or taken address is an error there, where the
// admin sees it) and served by a goroutine of its own under safego, so that
// a scrape never runs on a slurmctld thread or under its locks. A slurmctld
// that takes over from a running one (`scontrol reconfigure` from Slurm
// 24.05) uses Keep instead: the old one holds the address until the new one
// is up, so the new one waits for it rather than failing.
package metricsrv
