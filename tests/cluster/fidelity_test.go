package cluster_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
	"github.com/lachesis-sched/lachesis/internal/rigs/replay"
	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/sim"
)

// The replay harness of `make fidelity` on a small slice: two dozen Philly
// jobs of one virtual cluster, compressed 40x, under 2D-LAS on 2 nodes x 4
// GPUs. Every job must be found in slurmctld's log from submission to end,
// the log's requeues must be Slurm's own count, and the simulator, given
// the same jobs, shape, scaled settings and costs, must agree with the
// cluster on the average JCT within a loose bound (the full comparison,
// docs/evaluation's fidelity section, is a longer run).
func TestReplayAgreesWithTheSimulatorOnASmallSlice(t *testing.T) {
	runsAlone(t, "compares the cluster's timings with the simulator's")
	trace, err := sim.LoadTrace(refdata.Path(t, "philly/philly_jobs.csv"), sim.FormatPhilly)
	if err != nil {
		t.Fatal(err)
	}
	const nodes, gpus, compression = 2, 4, 40
	slice, err := replay.Slice(trace, []string{"b436b2"}, 160, 24, gpus)
	if err != nil {
		t.Fatal(err)
	}
	scaled, dropped, err := replay.ScaleTrace(slice, compression, gpus)
	if err != nil || dropped != 0 || len(scaled.Jobs) != 24 {
		t.Fatalf("scaled slice: %d jobs, %d dropped, %v", len(scaled.Jobs), dropped, err)
	}
	dir := clusterDir(t)
	out := &testenv.SyncBuffer{}
	r := &replay.Replayer{Root: repoRoot, Dir: dir, Nodes: nodes, GPUs: gpus, CPUs: 8, MemMB: 16000,
		PortBase: reservePortBlock(t), Compression: compression, Settings: replay.DefaultTraceSettings(),
		RestartPenalty: 1, SchedulerTick: replay.DefaultSchedulerTick, LaunchOverhead: replay.DefaultLaunchOverhead,
		BackfillInterval: replay.DefaultBackfillInterval, Out: out}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	c, err := r.Run(ctx, replay.LAS, scaled)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out.String())
	}
	var table strings.Builder
	replay.WriteTable(&table, compression, []replay.Comparison{c})
	t.Logf("%s", table.String())

	if len(c.Cluster.Jobs) != len(scaled.Jobs) || len(c.Simulation.Jobs) != len(scaled.Jobs) {
		t.Fatalf("%d jobs on the cluster, %d simulated, want %d", len(c.Cluster.Jobs), len(c.Simulation.Jobs), len(scaled.Jobs))
	}
	for _, o := range c.Cluster.Jobs {
		// A job sleeps its whole duration across its runs (a requeued one
		// resumes from its checkpoint), so it cannot end sooner.
		if o.FirstStart < o.Submit || o.End-o.FirstStart < o.Duration-0.5 {
			t.Errorf("job %d: submitted %.2f, started %.2f, ended %.2f for a %.0f s job", o.ID, o.Submit, o.FirstStart, o.End, o.Duration)
		}
	}
	if c.RestartsMismatched != 0 {
		t.Errorf("%d jobs' requeues in slurmctld's log differ from scontrol's Restarts", c.RestartsMismatched)
	}
	a, b := c.Cluster.Summarise(), c.Simulation.Summarise()
	if d := replay.Difference(a.AvgJCT, b.AvgJCT); math.Abs(d) > 0.30 {
		t.Errorf("average JCT: cluster %.1f s, simulator %.1f s (%+.0f%%), want within 30%%", a.AvgJCT, b.AvgJCT, 100*d)
	}
	if d := replay.Difference(a.Makespan, b.Makespan); math.Abs(d) > 0.30 {
		t.Errorf("makespan: cluster %.1f s, simulator %.1f s (%+.0f%%), want within 30%%", a.Makespan, b.Makespan, 100*d)
	}
}
