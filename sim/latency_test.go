package sim

import (
	"math"
	"testing"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Slurm's own latencies, for time-compressed replays: a start that an
// arrival or a completion allows waits for the background loop's next round
// (SchedulerTick), and every run holds its GPUs LaunchOverhead beyond its
// work. Job 1 (submitted at 0, the trace's start, 2 s) starts at the round
// at 1 and ends at 1 + 0.25 + 2; job 2, waiting for its GPU, starts at the
// next round, 4, and ends at 6.25. Off (the default), they run back to back
// from 0.
func TestSchedulerTickAndLaunchOverhead(t *testing.T) {
	tr := handTrace(t, [3]float64{0.3, 1, 2}, [3]float64{0.5, 1, 2})
	cfg := DefaultConfig()
	cfg.Shape, cfg.Policy = oneGPU(), PolicyFIFO
	cfg.NoCosts()
	off := runOK(t, cfg, tr)
	if off.Jobs[0].Finish != 2 || off.Jobs[1].Finish != 4 {
		t.Fatalf("off: ends %v %v, want 2 4", off.Jobs[0].Finish, off.Jobs[1].Finish)
	}
	cfg.SchedulerTick, cfg.LaunchOverhead = 1, 0.25
	r := runOK(t, cfg, tr)
	want := [][2]float64{{1, 3.25}, {4, 6.25}}
	for i, w := range want {
		if j := r.Jobs[i]; j.FirstStart != w[0] || j.Finish != w[1] {
			t.Errorf("job %d: start %v end %v, want %v %v", j.ID, j.FirstStart, j.Finish, w[0], w[1])
		}
	}
	for _, bad := range []float64{-1, math.Inf(1), math.NaN()} {
		c := cfg
		c.SchedulerTick = bad
		if _, err := Run(c, tr); err == nil {
			t.Errorf("scheduler tick %v accepted", bad)
		}
	}
}

// Under AllocStart with FallbackAfter, a sized job that does not fit as
// sized waits until it has waited that long before it is lowered, as
// slurmctld's pass lowers it after synergy.fallback_after; at 0 it is
// lowered at once. Job 1 (best case 3 CPUs of the node's 8) runs 0–100;
// job 2 (best case 6 CPUs, arriving at 1) finds 5 CPUs free, above its
// share (4): lowered at once it starts at 1, after a 10 s fallback at 11.
func TestAllocStartLowersAfterFallbackAfter(t *testing.T) {
	prof := func(name string, cpus []int, speed []float64) *sensitivity.Profile {
		p := &sensitivity.Profile{Model: name, CPUs: cpus, MemGB: []float64{1}}
		for _, v := range speed {
			p.Throughput = append(p.Throughput, []float64{v})
		}
		return p
	}
	cfg := DefaultConfig()
	cfg.NoCosts()
	cfg.Shape = Shape{Nodes: 1, GPUsPerNode: 2, CPUsPerNode: 8, MemGBNode: 16}
	cfg.Policy, cfg.Alloc, cfg.Models = PolicyFIFO, AllocStart, ModelsAsGiven
	cfg.Profiles = sensitivity.Profiles{"wide": prof("wide", []int{1, 6}, []float64{1, 2}),
		"mid": prof("mid", []int{1, 3}, []float64{1, 2})}
	tr := &Trace{Name: "fallback", Jobs: []Job{
		{ID: 1, Submit: 0, GPUs: 1, Duration: 200, Model: "mid"},
		{ID: 2, Submit: 1, GPUs: 1, Duration: 10, Model: "wide"},
	}}
	for _, c := range []struct{ after, start float64 }{{0, 1}, {10, 11}} {
		cfg.FallbackAfter = c.after
		r := runOK(t, cfg, tr)
		if got := r.Jobs[1].FirstStart; got != c.start {
			t.Errorf("fallback_after %v: job 2 starts at %v, want %v", c.after, got, c.start)
		}
	}
}
