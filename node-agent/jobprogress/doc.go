// Package jobprogress turns the iteration counts a job's own training loop
// reports (etc/lachesis_progress.py, through the agent's local socket) into
// iterations per second per job: the useful-work signal of issue 22
// (Gandiva's introspection measures time per mini-batch). The agent, not
// the report, says which job a count belongs to (node-agent/agent derives
// it from the reporting process); this package only does the arithmetic,
// with every count of state bounded: one accepted report per job per
// MinInterval, at most MaxJobs jobs, a job forgotten when it ends or after
// Stale without a report.
//
// The rate is an exponentially weighted moving average of the rates
// between successive reports, weighted by time (see Tracker). Tracker
// implements the agent's progress source for the job-usage report
// (wire.JobUsage.Progress) and exports each job's rate on the agent's
// /metrics (Collector).
package jobprogress
