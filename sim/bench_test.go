package sim

import (
	"testing"
)

// BenchmarkPhilly512Gittins replays the whole Philly trace (78,802 jobs) on
// 64 nodes × 8 GPUs with 2D-Gittins, the speed target of the simulator
// (< 30 s on 2 cores). It reports jobs simulated per second and the
// process's peak RSS.
func BenchmarkPhilly512Gittins(b *testing.B) {
	benchPhilly(b, PolicyGittins, AllocProportional)
}

// BenchmarkPhilly512LASSynergy is the same trace with 2D-LAS and Synergy
// allocation, where placement also evaluates CPUs and memory.
func BenchmarkPhilly512LASSynergy(b *testing.B) {
	benchPhilly(b, PolicyLAS, AllocSynergy)
}

func benchPhilly(b *testing.B, policy string, alloc AllocMode) {
	tr := philly(b)
	cfg := DefaultConfig()
	cfg.Policy, cfg.Alloc, cfg.Profiles = policy, alloc, profiles(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Run(cfg, tr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(tr.Jobs))*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	if rss, err := PeakRSS(); err == nil {
		b.ReportMetric(float64(rss)/(1<<20), "peakRSS-MiB")
	}
}
