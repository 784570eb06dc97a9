package sim

import (
	"math"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"

	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// refData is the path of rel inside the repository's data/.
func refData(t testing.TB, rel string) string { return refdata.Path(t, rel) }

// mustRun is Run's result, failing t where the run fails.
func mustRun(t testing.TB, c Config, tr *Trace) *Result {
	t.Helper()
	r, err := Run(c, tr)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var (
	phillyOnce  sync.Once
	phillyTrace *Trace
	phillyErr   error
)

// philly is the whole Philly trace, read once per test binary.
func philly(t testing.TB) *Trace {
	t.Helper()
	path := refData(t, "philly/philly_jobs.csv")
	phillyOnce.Do(func() { phillyTrace, phillyErr = LoadTrace(path, FormatAuto) })
	if phillyErr != nil {
		t.Fatal(phillyErr)
	}
	return phillyTrace
}

func profiles(t testing.TB) sensitivity.Profiles {
	t.Helper()
	f, err := os.Open(refData(t, "synergy/synergy_model_throughput.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps, err := sensitivity.ReadThroughputCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// phillySlice is a busy stretch of the trace small enough for unit tests.
func phillySlice(t testing.TB, jobs int) *Trace {
	t.Helper()
	ph := philly(t)
	s, err := ph.Select(Filter{FromSec: 28 * 86400, Limit: jobs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runOK runs a simulation that must succeed.
func runOK(t testing.TB, cfg Config, trace *Trace) *Result {
	t.Helper()
	r, err := Run(cfg, trace)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkInvariants checks what must hold for any policy on any trace.
func checkInvariants(t *testing.T, trace *Trace, cfg Config, r *Result) {
	t.Helper()
	if len(r.Jobs) != len(trace.Jobs) {
		t.Fatalf("%d results for %d jobs", len(r.Jobs), len(trace.Jobs))
	}
	runsOf := map[uint32][]RunRecord{}
	for _, run := range r.Runs {
		runsOf[run.JobID] = append(runsOf[run.JobID], run)
	}
	for i, j := range r.Jobs {
		tj := trace.Jobs[i]
		// Every job finishes, after it starts, which is after it arrives.
		if !(j.Finish > 0) || math.IsInf(j.Finish, 0) || j.FirstStart < tj.Submit || j.Finish < j.FirstStart {
			t.Fatalf("job %d: submit %v, first start %v, finish %v", j.ID, tj.Submit, j.FirstStart, j.Finish)
		}
		// JCT ≥ duration at the fastest speed the job ran at (1 under
		// proportional allocation, so JCT ≥ duration).
		floor := tj.Duration / j.MaxSpeed
		if cfg.Alloc == AllocProportional && j.MaxSpeed != 1 && synergyNodeShape(cfg.Shape) {
			t.Fatalf("job %d ran at speed %v under proportional allocation on Synergy's node shape", j.ID, j.MaxSpeed)
		}
		if j.JCT < floor-1e-6*floor {
			t.Fatalf("job %d: JCT %v < duration %v / speed %v", j.ID, j.JCT, tj.Duration, j.MaxSpeed)
		}
		if !cfg.RecordRuns {
			continue
		}
		runs := runsOf[j.ID]
		if len(runs) != j.Preemptions+1 {
			t.Fatalf("job %d: %d runs for %d preemptions", j.ID, len(runs), j.Preemptions)
		}
		for k, run := range runs {
			if k > 0 && run.Start < runs[k-1].End {
				t.Fatalf("job %d: runs overlap: %+v then %+v", j.ID, runs[k-1], run)
			}
			gpus := 0
			for _, s := range run.Slots {
				gpus += s.GPUs
			}
			if gpus != tj.GPUs {
				t.Fatalf("job %d: run holds %d GPUs, wants %d", j.ID, gpus, tj.GPUs)
			}
		}
		if runs[len(runs)-1].End != j.Finish {
			t.Fatalf("job %d: last run ends at %v, job finishes at %v", j.ID, runs[len(runs)-1].End, j.Finish)
		}
	}
	if cfg.RecordRuns {
		checkNoOvercommit(t, cfg.Shape, r.Runs)
	}
}

// checkNoOvercommit replays the runs as a sweep line over time and checks
// every node's GPUs, CPUs and memory at every instant. At equal times,
// releases come before acquisitions: a job may start the moment another
// ends.
func checkNoOvercommit(t *testing.T, shape Shape, runs []RunRecord) {
	t.Helper()
	type change struct {
		at          float64
		node, gpus  int
		cpus        int
		mem         float64
		acquisition bool
	}
	var changes []change
	for _, r := range runs {
		for _, s := range r.Slots {
			changes = append(changes,
				change{r.Start, s.Node, s.GPUs, s.CPUs, s.MemGB, true},
				change{r.End, s.Node, -s.GPUs, -s.CPUs, -s.MemGB, false})
		}
	}
	slices.SortStableFunc(changes, func(a, b change) int {
		switch {
		case a.at != b.at:
			return map[bool]int{true: -1, false: 1}[a.at < b.at]
		case a.acquisition == b.acquisition:
			return 0
		case !a.acquisition:
			return -1
		}
		return 1
	})
	gpuCap, nodes := shape.GPUsPerNode, shape.Nodes
	if shape.GPUCountOnly {
		gpuCap, nodes = shape.GPUs(), 1
	}
	gpus, cpus, mem := make([]int, nodes), make([]int, nodes), make([]float64, nodes)
	for _, c := range changes {
		gpus[c.node] += c.gpus
		cpus[c.node] += c.cpus
		mem[c.node] += c.mem
		if gpus[c.node] > gpuCap {
			t.Fatalf("node %d holds %d GPUs of %d at t=%v", c.node, gpus[c.node], gpuCap, c.at)
		}
		if !shape.GPUCountOnly && (cpus[c.node] > shape.CPUsPerNode || mem[c.node] > shape.MemGBNode+1e-6) {
			t.Fatalf("node %d holds %d CPUs, %.1f GB at t=%v", c.node, cpus[c.node], mem[c.node], c.at)
		}
	}
}

// synergyNodeShape: nodes like the servers the profiles were measured on,
// where the proportional share is the profiles' 1.0.
func synergyNodeShape(s Shape) bool {
	d := DefaultShape()
	return !s.GPUCountOnly && s.GPUsPerNode == d.GPUsPerNode && s.CPUsPerNode == d.CPUsPerNode && s.MemGBNode == d.MemGBNode
}
