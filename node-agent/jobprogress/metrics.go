package jobprogress

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	MetricJobItersPerSec  = "lachesis_agent_job_iterations_per_second"
	MetricProgressJobs    = "lachesis_agent_progress_jobs"
	MetricProgressReports = "lachesis_agent_progress_reports_total"
)

// Outcomes of the reports metric.
const (
	OutcomeAccepted  = "accepted"
	OutcomeRestarted = "restarted"
	OutcomeTooSoon   = "too_soon"
	OutcomeTooMany   = "too_many_jobs"
	OutcomeRefused   = "refused"
)

var (
	jobRateDesc = prometheus.NewDesc(MetricJobItersPerSec,
		"Iterations per second a job's training loop reported on this node (opt-in, etc/lachesis_progress.py), smoothed over about 30 s.",
		[]string{"hpc_job"}, nil)
	jobsDesc = prometheus.NewDesc(MetricProgressJobs,
		"Jobs whose progress the agent tracks.", nil, nil)
	reportsDesc = prometheus.NewDesc(MetricProgressReports,
		"Progress reports by outcome: accepted (restarted counts the accepted ones that began a new run), too_soon (rate-limited), too_many_jobs, refused (not from a job of the caller's on this node).",
		[]string{"outcome"}, nil)
)

// Collector exports the tracker at scrape time: one series per job with a
// rate, so a forgotten job's series is gone at the next scrape.
type Collector struct{ t *Tracker }

var _ prometheus.Collector = Collector{}

// Collector returns t's collector for the agent's registry.
func (t *Tracker) Collector() Collector { return Collector{t} }

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobRateDesc
	ch <- jobsDesc
	ch <- reportsDesc
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	for id, p := range c.t.Progress(time.Now()) {
		ch <- prometheus.MustNewConstMetric(jobRateDesc, prometheus.GaugeValue, p.ItersPerSec, strconv.FormatUint(uint64(id), 10))
	}
	ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(c.t.Jobs()))
	for _, o := range []struct {
		name string
		n    uint64
	}{
		{OutcomeAccepted, c.t.accepted.Load()},
		{OutcomeRestarted, c.t.restarts.Load()},
		{OutcomeTooSoon, c.t.tooSoon.Load()},
		{OutcomeTooMany, c.t.tooMany.Load()},
		{OutcomeRefused, c.t.refused.Load()},
	} {
		ch <- prometheus.MustNewConstMetric(reportsDesc, prometheus.CounterValue, float64(o.n), o.name)
	}
}
