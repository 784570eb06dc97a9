package core

import (
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/util/metricsrv"
	"github.com/lachesis-sched/lachesis/policy/synergy"
)

// Metric names the core registers (etc/grafana/lachesis-core.json queries
// them; a test checks that it queries nothing else).
const (
	MetricPassDuration  = "lachesis_pass_duration_seconds"
	MetricQueueJobs     = "lachesis_queue_jobs"
	MetricDemotions     = "lachesis_demotions_total"
	MetricPromotions    = "lachesis_promotions_total"
	MetricPreemptions   = "lachesis_preemptions_total"
	MetricPreemptAllows = "lachesis_preemptions_allowed_total"
	MetricSizing        = "lachesis_sizing_decisions_total"
	MetricAgentConns    = "lachesis_agent_connections_total"
	MetricAgentOpen     = "lachesis_agent_connections_open"
	MetricAgentReports  = "lachesis_agent_reports_total"
	MetricAgentRejected = "lachesis_agent_rejected_total"
	MetricFairShare     = "lachesis_fairshare_accounts"
	MetricOppJobs       = "lachesis_opportunistic_jobs"
	MetricOppUpgrades   = "lachesis_opportunistic_upgrades_total"
	MetricQuotaGPUs     = "lachesis_quota_gpus"
	MetricQuotaReclaims = "lachesis_quota_reclaimed_total"
	MetricQuotaStranded = "lachesis_quota_stranded_gpus"
)

// metrics is what the core records for Prometheus. A nil *metrics (no
// metrics.listen) records nothing, so every method is safe on nil. The
// pass's recording is plain integer work under c.mu plus a few atomic
// adds at the end of the pass: per-queue counts are gathered in a scratch
// slice and published once per pass.
type metrics struct {
	reg         *prometheus.Registry
	passSeconds prometheus.Histogram
	queueJobs   *prometheus.GaugeVec
	queueGauges []prometheus.Gauge // queueJobs by queue index, made once
	demotions   prometheus.Counter
	promotions  prometheus.Counter
	preemptions prometheus.Counter    // requeues a pass observed
	allowed     prometheus.Counter    // yeses Preemptable gave Slurm
	sizing      [4]prometheus.Counter // by synergy.Action
	// fair share after the last pass: accounts tracked (with usage or
	// jobs), with jobs under or at their share, with jobs over it
	fsTracked, fsUnder, fsOver prometheus.Gauge
	// the opportunistic class after the last pass: its jobs waiting and
	// running; and the upgrades to guaranteed.
	oppPending, oppRunning prometheus.Gauge
	upgrades               prometheus.Counter
	// quotas (quota.go): each account's GPUs by kind (deserved,
	// allocated, borrowed) after the last pass, and the borrowers requeued
	// for it (KAI's per-queue figures).
	quotaGPUs     *prometheus.GaugeVec
	quotaReclaims *prometheus.CounterVec
	// quotaStrandedGPUs: free GPUs in pieces too small for the smallest
	// waiting within-quota job after the last pass (quotaplace.go).
	quotaStrandedGPUs prometheus.Gauge

	// Scratch of the pass in progress, under c.mu.
	counts                               []int
	demoted, promoted                    int
	oppWaiting, oppRunningNow, upgradedN int

	// The agent listener's counters, read at scrape time (agentCollector).
	agents                func() *agentserver.Server
	agentConns, agentOpen *prometheus.Desc
	agentReports          *prometheus.Desc
	agentRejected         *prometheus.Desc
	// collectors registered in reg (the dashboard test describes them).
	collectors []prometheus.Collector
}

// sizingOutcome names each synergy.Action in lachesis_sizing_decisions_total.
var sizingOutcome = [...]string{synergy.Leave: "leave", synergy.Set: "set", synergy.Reject: "reject", synergy.ToShards: "shards"}

func newMetrics(extra ...prometheus.Collector) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricPassDuration,
			Help: "Time one priority pass holds the core, from lock to decisions.",
			// 100µs to ~26s: a pass over 100k jobs takes tens of ms.
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10),
		}),
		queueJobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricQueueJobs,
			Help: "Jobs (pending and running, not held) in each Tiresias queue after the last pass.",
		}, []string{"queue"}),
		demotions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricDemotions, Help: "Jobs moved to a lower-priority queue by attained service.",
		}),
		promotions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPromotions, Help: "Jobs promoted back to queue 0 against starvation.",
		}),
		preemptions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPreemptions,
			Help: "Running jobs requeued by a preemption Lachesis allowed, counted when a pass finds them pending again.",
		}),
		// Slurm asks about every candidate of a victim search and may
		// requeue fewer, or none, of those allowed.
		allowed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPreemptAllows,
			Help: "Times preempt/tiresias let Slurm preempt a job (Preemptable answered yes); not every yes becomes a requeue.",
		}),
		agentConns: prometheus.NewDesc(MetricAgentConns, "Connections the node-agent listener accepted.", nil, nil),
		agentOpen:  prometheus.NewDesc(MetricAgentOpen, "Node-agent connections open now.", nil, nil),
		agentReports: prometheus.NewDesc(MetricAgentReports,
			"Node-agent reports accepted, by kind (profile, duplicate_profile, telemetry, job_usage).", []string{"kind"}, nil),
		agentRejected: prometheus.NewDesc(MetricAgentRejected,
			"Node-agent connections or frames rejected, by reason.", []string{"reason"}, nil),
	}
	sizing := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricSizing, Help: "Synergy sizing decisions at submit, by outcome.",
	}, []string{"outcome"})
	for a, name := range sizingOutcome {
		m.sizing[a] = sizing.WithLabelValues(name)
	}
	fs := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricFairShare,
		Help: "Accounts after the last pass, by class: tracked (with decayed usage or jobs), under (with jobs, at or under their share), over (with jobs, over their share).",
	}, []string{"class"})
	m.fsTracked, m.fsUnder, m.fsOver = fs.WithLabelValues("tracked"), fs.WithLabelValues("under"), fs.WithLabelValues("over")
	opp := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricOppJobs,
		Help: "Jobs of the opportunistic class (not upgraded, not held) after the last pass, by state (pending, running).",
	}, []string{"state"})
	m.oppPending, m.oppRunning = opp.WithLabelValues("pending"), opp.WithLabelValues("running")
	m.upgrades = prometheus.NewCounter(prometheus.CounterOpts{
		Name: MetricOppUpgrades, Help: "Opportunistic jobs upgraded to guaranteed after waiting sharing.promote_after.",
	})
	m.quotaGPUs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricQuotaGPUs,
		Help: "GPUs of each account after the last pass, by kind: deserved (its quota), allocated (its running jobs'), borrowed (its running jobs' beyond its quota). Only with a quota section.",
	}, []string{"account", "kind"})
	m.quotaReclaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricQuotaReclaims,
		Help: "Borrowed jobs of other accounts requeued so that the account's within-quota jobs could run.",
	}, []string{"account"})
	m.quotaStrandedGPUs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricQuotaStranded,
		Help: "Free GPUs after the last pass on nodes with too few free to hold the smallest waiting within-quota job (fragmentation; 0 when none waits). Only with a quota section and Slurm's node table.",
	})
	m.collectors = []prometheus.Collector{m.passSeconds, m.queueJobs, m.demotions, m.promotions, m.preemptions, m.allowed, sizing, fs,
		opp, m.upgrades, m.quotaGPUs, m.quotaReclaims, m.quotaStrandedGPUs, agentCollector{m}, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	// GPU sharing's own (gpushare), when the core has them.
	m.collectors = append(m.collectors, extra...)
	m.reg.MustRegister(m.collectors...)
	return m
}

// serve starts /metrics at addr; agents supplies the listener whose
// counters are read at scrape time (nil: none). takeover: the slurmctld
// this one replaces still holds addr (Env.Reconfigure), so it is waited
// for instead of refused.
func (m *metrics) serve(addr string, agents *agentserver.Service, takeover bool, log *slog.Logger) (io.Closer, error) {
	if m == nil || addr == "" {
		return nil, nil
	}
	if agents != nil {
		m.agents = agents.Server
	}
	if takeover {
		return metricsrv.Keep(addr, m.reg, log, takeoverRetry), nil
	}
	s, err := metricsrv.Start(addr, m.reg, log)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// takeoverRetry is how often a slurmctld that replaces another tries the
// metrics address again; the old one lets it go once the new one is up.
const takeoverRetry = time.Second

// fairShare publishes the pass's fair-share classes.
func (m *metrics) fairShare(tracked, withJobs, over int) {
	if m == nil {
		return
	}
	m.fsTracked.Set(float64(tracked))
	m.fsUnder.Set(float64(withJobs - over))
	m.fsOver.Set(float64(over))
}

// queueChange notes one ranked job of the pass: its queue before and after.
func (m *metrics) queueChange(before, after int, promoted bool) {
	if m == nil {
		return
	}
	switch {
	case promoted:
		m.promoted++
	case after > before:
		m.demoted++
	}
	for len(m.counts) <= after {
		m.counts = append(m.counts, 0)
	}
	m.counts[after]++
}

// opportunistic notes one ranked job of the pass: whether it is in the
// opportunistic class, runs, and was upgraded by this pass.
func (m *metrics) opportunistic(opportunistic, running, upgraded bool) {
	if m == nil {
		return
	}
	switch {
	case opportunistic && running:
		m.oppRunningNow++
	case opportunistic:
		m.oppWaiting++
	}
	if upgraded {
		m.upgradedN++
	}
}

// passDone publishes the pass's counts and its duration since start.
func (m *metrics) passDone(start time.Time) {
	if m == nil {
		return
	}
	for len(m.queueGauges) < len(m.counts) {
		m.queueGauges = append(m.queueGauges, m.queueJobs.WithLabelValues(strconv.Itoa(len(m.queueGauges))))
	}
	// Every queue ever seen is set, so one emptied by this pass reads 0.
	for q, g := range m.queueGauges {
		n := 0
		if q < len(m.counts) {
			n = m.counts[q]
		}
		g.Set(float64(n))
	}
	clear(m.counts)
	m.demotions.Add(float64(m.demoted))
	m.promotions.Add(float64(m.promoted))
	m.demoted, m.promoted = 0, 0
	m.oppPending.Set(float64(m.oppWaiting))
	m.oppRunning.Set(float64(m.oppRunningNow))
	m.upgrades.Add(float64(m.upgradedN))
	m.oppWaiting, m.oppRunningNow, m.upgradedN = 0, 0, 0
	m.passSeconds.Observe(time.Since(start).Seconds())
}

// preemption counts a preemption Slurm was allowed and returns allowed
// unchanged.
func (m *metrics) preemption(allowed bool) bool {
	if m != nil && allowed {
		m.allowed.Inc()
	}
	return allowed
}

// requeued counts a running job a pass found pending again, when a
// preemption Lachesis allowed requeued it (not an admin's or its owner's
// scontrol requeue).
func (m *metrics) requeued(byPreemption bool) {
	if m != nil && byPreemption {
		m.preemptions.Inc()
	}
}

// quotaAccounts publishes the pass's per-account quota figures; an
// account gone from them (no quota, no running job) is dropped.
func (m *metrics) quotaAccounts(accounts map[string]*accountQuota) {
	if m == nil {
		return
	}
	m.quotaGPUs.Reset()
	for name, a := range accounts {
		m.quotaGPUs.WithLabelValues(name, "deserved").Set(float64(a.deserved))
		m.quotaGPUs.WithLabelValues(name, "allocated").Set(float64(a.allocated))
		m.quotaGPUs.WithLabelValues(name, "borrowed").Set(float64(a.borrowed))
	}
}

// quotaStranded publishes the pass's stranded GPUs.
func (m *metrics) quotaStranded(gpus int) {
	if m != nil {
		m.quotaStrandedGPUs.Set(float64(gpus))
	}
}

// quotaReclaim counts one borrower requeued for account.
func (m *metrics) quotaReclaim(account string) {
	if m != nil {
		m.quotaReclaims.WithLabelValues(account).Inc()
	}
}

// sized counts one Synergy decision by its outcome.
func (m *metrics) sized(a synergy.Action) {
	if m != nil && int(a) >= 0 && int(a) < len(m.sizing) {
		m.sizing[a].Inc()
	}
}

// agentCollector reads the node-agent listener's counters at scrape time,
// on the metrics goroutine: the listener keeps them already.
type agentCollector struct{ m *metrics }

func (a agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- a.m.agentConns
	ch <- a.m.agentOpen
	ch <- a.m.agentReports
	ch <- a.m.agentRejected
}

func (a agentCollector) Collect(ch chan<- prometheus.Metric) {
	if a.m.agents == nil {
		return
	}
	srv := a.m.agents()
	if srv == nil {
		return
	}
	st := srv.Stats()
	ch <- prometheus.MustNewConstMetric(a.m.agentConns, prometheus.CounterValue, float64(st.Connections))
	ch <- prometheus.MustNewConstMetric(a.m.agentOpen, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(a.m.agentReports, prometheus.CounterValue, float64(st.Profiles), "profile")
	ch <- prometheus.MustNewConstMetric(a.m.agentReports, prometheus.CounterValue, float64(st.Duplicates), "duplicate_profile")
	ch <- prometheus.MustNewConstMetric(a.m.agentReports, prometheus.CounterValue, float64(st.Telemetry), "telemetry")
	ch <- prometheus.MustNewConstMetric(a.m.agentReports, prometheus.CounterValue, float64(st.JobUsage), "job_usage")
	for r, n := range st.Rejections {
		ch <- prometheus.MustNewConstMetric(a.m.agentRejected, prometheus.CounterValue, float64(n), string(r))
	}
}

// newMetricsIf returns the core's metrics, with extra collectors, when
// listen is set, else nil.
func newMetricsIf(listen string, extra ...prometheus.Collector) *metrics {
	if listen == "" {
		return nil
	}
	return newMetrics(extra...)
}
