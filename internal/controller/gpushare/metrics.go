package gpushare

import "github.com/prometheus/client_golang/prometheus"

// Metric names of per-job GPU use and sharing (the core registers them
// with its own, Collectors).
const (
	MetricUsageDropped = "lachesis_usage_dropped_total"
	MetricUsageIdle    = "lachesis_usage_idle_jobs"
)

// metrics is what sharing records for Prometheus. A nil *metrics (no
// metrics.listen) records nothing, so every method is safe on nil.
type metrics struct {
	// per-job GPU use (usage.go): entries dropped by reason, idle jobs
	usageDrops  *prometheus.CounterVec
	usageIdle   prometheus.Gauge
	reverts     *prometheus.CounterVec // by signal (introspect.go)
	memRequeues *prometheus.CounterVec // by reason (memguard.go)
}

func newMetrics() *metrics {
	m := &metrics{}
	m.usageDrops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricUsageDropped,
		Help: "Entries of node agents' job-usage reports dropped, by reason (unknown_job, wrong_user, no_gpus, repeat).",
	}, []string{"reason"})
	for _, r := range dropReasons {
		m.usageDrops.WithLabelValues(r)
	}
	m.usageIdle = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: MetricUsageIdle,
		Help: "Running jobs holding GPUs below usage.idle_below_pct for usage.idle_after, after the last pass.",
	})
	m.reverts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricReverts,
		Help: "Opportunistic jobs requeued because the guaranteed job beside them lost more than sharing.max_slowdown, by the signal measured (iterations/s, GPU utilisation).",
	}, []string{"signal"})
	m.reverts.WithLabelValues(signalIters)
	m.reverts.WithLabelValues(signalUtil)
	m.memRequeues = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricMemoryRequeues,
		Help: "Opportunistic jobs requeued for holding more GPU memory than the guaranteed jobs beside them leave (their measured peak and sharing.guest_memory_headroom_pct), by reason (over_room; no_room: their peak left none).",
	}, []string{"reason"})
	m.memRequeues.WithLabelValues(memOverRoom)
	m.memRequeues.WithLabelValues(memNoRoom)
	return m
}

// Collectors are sharing's metrics, for the core's registry; none when
// metrics are off.
func (c *Sharing) Collectors() []prometheus.Collector {
	m := c.met
	if m == nil {
		return nil
	}
	return []prometheus.Collector{m.reverts, m.memRequeues, m.usageDrops, m.usageIdle}
}

// usageDropped counts one dropped entry of a job-usage report.
func (m *metrics) usageDropped(reason string) {
	if m != nil {
		m.usageDrops.WithLabelValues(reason).Inc()
	}
}

// revert counts one opportunistic job introspection requeued.
func (m *metrics) revert(signal string) {
	if m != nil {
		m.reverts.WithLabelValues(signal).Inc()
	}
}

// memoryRequeue counts one opportunistic job requeued for its memory.
func (m *metrics) memoryRequeue(reason string) {
	if m != nil {
		m.memRequeues.WithLabelValues(reason).Inc()
	}
}

// idleJobs publishes how many running jobs hold their GPUs idle.
func (m *metrics) idleJobs(n int) {
	if m != nil {
		m.usageIdle.Set(float64(n))
	}
}
