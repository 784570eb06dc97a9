package telemetry

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Metric names of the GPU collector.
const (
	MetricGPUUp          = "lachesis_agent_gpu_telemetry_up"
	MetricGPUUtil        = "lachesis_agent_gpu_utilization_percent"
	MetricGPUMemUsed     = "lachesis_agent_gpu_memory_used_bytes"
	MetricGPUMemTotal    = "lachesis_agent_gpu_memory_total_bytes"
	MetricGPUPower       = "lachesis_agent_gpu_power_watts"
	MetricGPUTemperature = "lachesis_agent_gpu_temperature_celsius"
)

// Collector exports one NVML sample per scrape, per GPU. Reading NVML at
// scrape time (rather than caching the telemetry loop's last sample) keeps
// the values fresh whatever telemetry_interval is, including 0.
type Collector struct {
	src                                      Source
	up, util, memUsed, memTotal, power, temp *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a collector sampling src, which may be nil or
// Disabled: then only lachesis_agent_gpu_telemetry_up (0) is exported.
func NewCollector(src Source) *Collector {
	labels := []string{"gpu", "uuid", "name"}
	return &Collector{
		src:      src,
		up:       prometheus.NewDesc(MetricGPUUp, "1 if the last scrape's NVML sample succeeded, else 0 (no driver, or NVML failing).", nil, nil),
		util:     prometheus.NewDesc(MetricGPUUtil, "GPU utilisation (NVML), percent.", labels, nil),
		memUsed:  prometheus.NewDesc(MetricGPUMemUsed, "GPU memory in use (NVML), bytes.", labels, nil),
		memTotal: prometheus.NewDesc(MetricGPUMemTotal, "GPU memory installed (NVML), bytes.", labels, nil),
		power:    prometheus.NewDesc(MetricGPUPower, "GPU power draw (NVML), watts.", labels, nil),
		temp:     prometheus.NewDesc(MetricGPUTemperature, "GPU core temperature (NVML), degrees Celsius.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.util, c.memUsed, c.memTotal, c.power, c.temp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	var gpus []wire.GPU
	var err error = ErrNoDriver
	if c.src != nil {
		gpus, err = c.src.Sample()
	}
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	if err != nil {
		return
	}
	for _, g := range gpus {
		l := []string{strconv.Itoa(g.Index), g.UUID, g.Name}
		ch <- prometheus.MustNewConstMetric(c.util, prometheus.GaugeValue, g.UtilPct, l...)
		ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, g.MemUsedMB*(1<<20), l...)
		ch <- prometheus.MustNewConstMetric(c.memTotal, prometheus.GaugeValue, g.MemTotalMB*(1<<20), l...)
		ch <- prometheus.MustNewConstMetric(c.power, prometheus.GaugeValue, g.PowerW, l...)
		ch <- prometheus.MustNewConstMetric(c.temp, prometheus.GaugeValue, g.TempC, l...)
	}
}
