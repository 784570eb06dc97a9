package sim

import (
	"math"
	"testing"
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
