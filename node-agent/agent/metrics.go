package agent

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/node-agent/jobprogress"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// Metric names of the agent (besides telemetry's GPU metrics).
const (
	MetricSpoolPending     = "lachesis_agent_spool_pending"
	MetricSpoolDelivered   = "lachesis_agent_spool_delivered"
	MetricDeliveryFailures = "lachesis_agent_delivery_failures_total"
	MetricProfilingRuns    = "lachesis_agent_profiling_runs_total"
	kindProfile, kindTelem = "profile", "telemetry"
	kindGPUUse             = "job_usage"
	outcomeCompleted       = "completed"
	outcomeFailed          = spool.RunFailed
	outcomeInterrupted     = spool.RunInterrupted
)

// agentMetrics is the agent's private registry. It is always kept (a few
// counters); it is served only when metrics.listen is set.
type agentMetrics struct {
	reg      *prometheus.Registry
	failures *prometheus.CounterVec
	runs     *prometheus.CounterVec
	gpuUse   *gpuUseCollector // gpuuse.go
}

func newAgentMetrics(sp *spool.Spool, src telemetry.Source, procs telemetry.ProcessSource, tracker *jobprogress.Tracker) *agentMetrics {
	m := &agentMetrics{
		reg: prometheus.NewRegistry(),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDeliveryFailures,
			Help: "Reports the controller did not acknowledge, by kind (profile attempts are retried; telemetry and job_usage are not).",
		}, []string{"kind"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricProfilingRuns,
			Help: "Profiling sweeps that ran, by outcome (completed, failed, interrupted).",
		}, []string{"outcome"}),
		gpuUse: &gpuUseCollector{},
	}
	// Every label value exists from the start, so a rate over it is
	// defined before the first failure.
	for _, k := range []string{kindProfile, kindTelem, kindGPUUse} {
		m.failures.WithLabelValues(k)
	}
	for _, o := range []string{outcomeCompleted, outcomeFailed, outcomeInterrupted} {
		m.runs.WithLabelValues(o)
	}
	m.reg.MustRegister(m.failures, m.runs, spoolCollector{sp}, telemetry.NewCollector(src), m.gpuUse)
	// The fake GPU device counts the records it did not believe.
	if c, ok := procs.(prometheus.Collector); ok {
		m.reg.MustRegister(c)
	}
	if tracker != nil {
		m.reg.MustRegister(tracker.Collector())
	}
	return m
}

// countingSender counts the deliverer's failed attempts.
type countingSender struct {
	deliver.Sender
	failures prometheus.Counter
}

func (s countingSender) Send(ctx context.Context, t wire.Type, payload any) (wire.Ack, error) {
	ack, err := s.Sender.Send(ctx, t, payload)
	if err != nil && ctx.Err() == nil {
		s.failures.Inc()
	}
	return ack, err
}

var (
	spoolPendingDesc = prometheus.NewDesc(MetricSpoolPending,
		"Profiles in the spool not yet acknowledged by the controller.", nil, nil)
	spoolDeliveredDesc = prometheus.NewDesc(MetricSpoolDelivered,
		"Profiles in the spool the controller acknowledged.", nil, nil)
)

// spoolCollector counts the spool at scrape time (one SQLite query).
type spoolCollector struct{ sp *spool.Spool }

func (spoolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- spoolPendingDesc
	ch <- spoolDeliveredDesc
}

func (s spoolCollector) Collect(ch chan<- prometheus.Metric) {
	c, err := s.sp.Count()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(spoolPendingDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(spoolPendingDesc, prometheus.GaugeValue, float64(c.Pending))
	ch <- prometheus.MustNewConstMetric(spoolDeliveredDesc, prometheus.GaugeValue, float64(c.Delivered))
}

// Metrics is the agent's registry, served on metrics.listen.
func (a *Agent) Metrics() prometheus.Gatherer { return a.met.reg }
