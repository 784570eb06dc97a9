package replay

import (
	"errors"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim"
)

func TestScaleDividesEveryTimeValuedSetting(t *testing.T) {
	s := DefaultTraceSettings()
	s.Tiresias.FixThresholds([]float64{2000, 8000})
	s.Tiresias.Preemption.MinRun = 600
	s.Tiresias.SiblingWindow = 600
	s.Tiresias.MaxAge = 3600
	s.FallbackAfter = 400
	s.PassInterval = 30
	got, err := Scale(s, 20)
	if err != nil {
		t.Fatal(err)
	}
	c := got.Config
	if c.Tiresias.Thresholds[0] != 100 || c.Tiresias.Thresholds[1] != 400 || len(c.Tiresias.ThresholdQuantiles) != 0 {
		t.Errorf("thresholds %v quantiles %v, want [100 400] and none", c.Tiresias.Thresholds, c.Tiresias.ThresholdQuantiles)
	}
	if c.Tiresias.Preemption.MinRun != 30 || c.Tiresias.SiblingWindow != 30 || c.Tiresias.MaxAge != 180 {
		t.Errorf("min_run %v sibling_window %v max_age %v, want 30 30 180",
			c.Tiresias.Preemption.MinRun, c.Tiresias.SiblingWindow, c.Tiresias.MaxAge)
	}
	if c.Synergy.FallbackAfter != 20*time.Second {
		t.Errorf("fallback_after %v, want 20s", c.Synergy.FallbackAfter)
	}
	if c.PassInterval != 2*time.Second || got.PassInterval != 2 {
		t.Errorf("pass interval %v / %d, want 2 s", c.PassInterval, got.PassInterval)
	}
	if c.GittinsMinHistory != GittinsMinHistory {
		t.Errorf("gittins_min_history %d, want %d: the core would learn from the slice", c.GittinsMinHistory, GittinsMinHistory)
	}
	if c.Tiresias.InheritService {
		t.Error("inherit_service is on; the replay submits every job as one user")
	}
	if c.Tiresias.FairShare.Enabled {
		t.Error("fair share is on; the replay submits every job as one user")
	}
}

func TestScaleKeepsWhatSlurmCannotScale(t *testing.T) {
	s := DefaultTraceSettings()
	got, err := Scale(s, 100) // 30 s / 100 is below the plugin's whole second
	if err != nil {
		t.Fatal(err)
	}
	if got.PassInterval != 1 || got.Config.PassInterval != time.Second {
		t.Errorf("pass interval %d, want 1", got.PassInterval)
	}
	notes := strings.Join(got.Notes, "\n")
	for _, want := range []string{"pass_interval", "requeue hold", "600 s of trace time", "seed distribution"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	s.Tiresias.ThresholdQuantiles = []float64{0.5}
	if _, err := Scale(s, 20); !errors.Is(err, ErrReplay) {
		t.Errorf("quantile thresholds scaled without error: %v", err)
	}
	for _, bad := range []float64{0, 0.5, math.NaN(), math.Inf(1)} {
		if _, err := Scale(DefaultTraceSettings(), bad); !errors.Is(err, ErrReplay) {
			t.Errorf("compression %v accepted: %v", bad, err)
		}
	}
}

func TestDefaultTraceSettingsFixTheSeedQuantiles(t *testing.T) {
	c := DefaultTraceSettings().Tiresias
	want := []float64{2227, 8215, 2268824} // lachesis.yaml's comment
	if len(c.Thresholds) != len(want) || len(c.ThresholdQuantiles) != 0 {
		t.Fatalf("thresholds %v quantiles %v", c.Thresholds, c.ThresholdQuantiles)
	}
	for i := range want {
		if c.Thresholds[i] != want[i] {
			t.Errorf("thresholds %v, want %v", c.Thresholds, want)
		}
	}
}

func TestScaleTraceRoundsDurationsAndDropsWideJobs(t *testing.T) {
	tr := &sim.Trace{Name: "t", Jobs: []sim.Job{
		{ID: 1, Submit: 0, GPUs: 1, Duration: 5},     // 0.25 s -> 1 s
		{ID: 2, Submit: 200, GPUs: 4, Duration: 610}, // 30.5 s -> 31 s (rounded half away)
		{ID: 3, Submit: 400, GPUs: 8, Duration: 100}, // wider than a node
	}}
	got, dropped, err := ScaleTrace(tr, 20, 4)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 1 || len(got.Jobs) != 2 {
		t.Fatalf("dropped %d kept %d, want 1 and 2", dropped, len(got.Jobs))
	}
	if got.Jobs[0].Duration != 1 || got.Jobs[1].Duration != 31 || got.Jobs[1].Submit != 10 {
		t.Errorf("jobs %+v", got.Jobs)
	}
	if tr.Jobs[1].Duration != 610 {
		t.Error("ScaleTrace changed its input")
	}
}

// A slurmctld 22.05 log, abridged from a cluster test's: job 1 runs, is
// requeued for job 2, held, runs again by the main scheduler and ends.
const ctldLog = `[2026-11-25T12:37:43.579] _slurm_rpc_submit_batch_job: JobId=1 InitPrio=66666667 usec=867
[2026-11-25T12:37:44.760] sched/backfill: _start_job: Started JobId=1 in gpu on lnode1
[2026-11-25T12:37:50.222] _slurm_rpc_submit_batch_job: JobId=2 InitPrio=66666667 usec=1405
[2026-11-25T12:37:50.761] preempted JobId=1 has been requeued to reclaim resources for JobId=2
[2026-11-25T12:37:50.761] sched/backfill: _start_job: Failed to start JobId=2 with lnode1 avail: Requested nodes are busy
[2026-11-25T12:37:50.797] sched: Allocate JobId=2 NodeList=lnode1 #CPUs=2 Partition=gpu
[2026-11-25T12:37:50.797] Requeuing JobId=1
[2026-11-25T12:37:55.001] _job_complete: JobId=2 WEXITSTATUS 0
[2026-11-25T12:37:55.002] _job_complete: JobId=2 done
[2026-11-25T12:37:56.845] sched: Allocate JobId=1 NodeList=lnode1 #CPUs=8 Partition=gpu
[2026-11-25T12:38:08.157] _job_complete: JobId=1 done
`

func TestReadControllerLog(t *testing.T) {
	recs, err := ReadControllerLog(strings.NewReader(ctldLog), nil)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, _ := time.ParseInLocation("15:04:05.000", s, time.Local)
		return v
	}
	clock := func(v time.Time) time.Time {
		return at(v.Format("15:04:05.000"))
	}
	one, two := recs[1], recs[2]
	if one == nil || two == nil {
		t.Fatalf("records %v", recs)
	}
	if len(one.Runs) != 2 || one.Requeues() != 1 || !one.Runs[0].Requeued || one.Runs[1].Requeued {
		t.Fatalf("job 1 runs %+v", one.Runs)
	}
	if !clock(one.Submit).Equal(at("12:37:43.579")) || !clock(one.Runs[0].End).Equal(at("12:37:50.761")) ||
		!clock(one.Runs[1].Start).Equal(at("12:37:56.845")) || !clock(one.End).Equal(at("12:38:08.157")) {
		t.Errorf("job 1 %+v", one)
	}
	if len(two.Runs) != 1 || two.Requeues() != 0 || !clock(two.Runs[0].Start).Equal(at("12:37:50.797")) ||
		!clock(two.End).Equal(at("12:37:55.002")) {
		t.Errorf("job 2 %+v", two)
	}
	only, err := ReadControllerLog(strings.NewReader(ctldLog), map[uint32]bool{2: true})
	if err != nil || len(only) != 1 || only[2] == nil {
		t.Errorf("filtered records %v, %v", only, err)
	}
}

func TestReadControllerLogSkipsHugeLines(t *testing.T) {
	log := "[2026-11-25T12:37:43.579] " + strings.Repeat("x", 3*maxLogLine) + "\n" + ctldLog
	recs, err := ReadControllerLog(strings.NewReader(log), nil)
	if err != nil || recs[1] == nil || recs[1].End.IsZero() {
		t.Fatalf("records after a huge line: %v, %v", recs, err)
	}
}

func TestClusterSideNeedsEveryJobsRecords(t *testing.T) {
	recs, _ := ReadControllerLog(strings.NewReader(ctldLog), nil)
	jobs := []sim.Job{{ID: 10, GPUs: 1, Duration: 5}, {ID: 20, GPUs: 1, Duration: 4}}
	side, err := ClusterSide("cluster", jobs, map[uint32]uint32{10: 1, 20: 2}, recs)
	if err != nil {
		t.Fatal(err)
	}
	if side.Jobs[0].Submit != 0 || side.Jobs[0].Preemptions != 1 || math.Abs(side.Jobs[1].Submit-6.643) > 1e-9 {
		t.Errorf("side %+v", side.Jobs)
	}
	if _, err := ClusterSide("cluster", append(jobs, sim.Job{ID: 30, GPUs: 1, Duration: 1}),
		map[uint32]uint32{10: 1, 20: 2, 30: 3}, recs); !errors.Is(err, ErrReplay) {
		t.Errorf("a job missing from the log gave %v", err)
	}
}

// The simulator breaks priority ties by job id, as Slurm does by its own
// job ids: given Slurm's ids, it starts the job Slurm numbered first.
func TestSimulateBreaksTiesBySlurmsJobIDs(t *testing.T) {
	scaled, err := Scale(DefaultTraceSettings(), 20)
	if err != nil {
		t.Fatal(err)
	}
	// Two 1-GPU jobs submitted in the same second wait for one GPU; the
	// trace numbers them the other way round from Slurm.
	cluster := Side{Jobs: []Outcome{
		{ID: 9, SlurmID: 100, GPUs: 1, Duration: 10, Submit: 0},
		{ID: 2, SlurmID: 101, GPUs: 1, Duration: 10, Submit: 0.5},
		{ID: 1, SlurmID: 102, GPUs: 1, Duration: 10, Submit: 0.6},
	}}
	side, _, err := Simulate(LAS, sim.Shape{Nodes: 1, GPUsPerNode: 1, CPUsPerNode: 2, MemGBNode: 4}, scaled,
		SimCosts{RequeueHold: RequeueHold, PassInterval: 1}, cluster, nil)
	if err != nil {
		t.Fatal(err)
	}
	if side.Jobs[1].FirstStart != 10 || side.Jobs[2].FirstStart != 20 {
		t.Errorf("starts %v %v, want 10 (Slurm's job 101) then 20", side.Jobs[1].FirstStart, side.Jobs[2].FirstStart)
	}
}

func TestSummariseAndRatios(t *testing.T) {
	a := Side{Jobs: []Outcome{{ID: 1, Submit: 0, End: 10, Preemptions: 1}, {ID: 2, Submit: 2, End: 22}}}
	b := Side{Jobs: []Outcome{{ID: 1, Submit: 0, End: 8}, {ID: 2, Submit: 2, End: 22}}}
	s := a.Summarise()
	if s.AvgJCT != 15 || s.Makespan != 22 || s.PreemptionsPerJob != 0.5 || s.MaxPreemptionsOfJob != 1 {
		t.Errorf("summary %+v", s)
	}
	r := Ratios(a, b)
	if len(r) != 2 || r[0] != 1 || r[1] != 1.25 {
		t.Errorf("ratios %v", r)
	}
	if Difference(11, 10) != 0.1 || Difference(0, 0) != 0 {
		t.Error("Difference")
	}
}

var testModels = map[string]demo.Model{
	"image":    {Name: "image", Speeds: "1:0.37,2:0.72,3:1,4:1.3,5:1.53,6:1.75,9:2.4", BestCPUs: 9, BestMemGB: 10},
	"language": {Name: "language", Speeds: "1:1", BestCPUs: 1, BestMemGB: 4},
}

// The simulator's profiles run at the sleeper's speeds: a step function of
// whole CPUs per GPU, flat in memory from the best case's up.
func TestSimProfilesFollowTheSleepersSpeeds(t *testing.T) {
	ps, err := SimProfiles(testModels)
	if err != nil {
		t.Fatal(err)
	}
	img := ps["image"]
	for _, c := range []struct{ cpus, mem, want float64 }{{3, 12, 1}, {2.5, 12, 0.72}, {8, 10, 1.75}, {9, 40, 2.4}} {
		if got := img.At(c.cpus, c.mem); got != c.want {
			t.Errorf("image at %g CPUs, %g GB: %g, want %g", c.cpus, c.mem, got, c.want)
		}
	}
	if d, _ := img.BestCase(sensitivity.DefaultTolerance); d.CPUsPerGPU != 9 || d.MemGBPerGPU != 10 {
		t.Errorf("image best case %+v, want 9 CPUs, 10 GB: job_submit/synergy's", d)
	}
	bad := map[string]demo.Model{"m": {Name: "m", Speeds: "1:1,3:2", BestCPUs: 1, BestMemGB: 1}}
	if _, err := SimProfiles(bad); !errors.Is(err, ErrReplay) {
		t.Errorf("a profile whose best case is not the model's was accepted: %v", err)
	}
	for _, speeds := range []string{"", "2:1,1:2", "1:0", "1:x", strings.Repeat("1:1,", 100) + "1:1"} {
		if _, err := SimProfiles(map[string]demo.Model{"m": {Name: "m", Speeds: speeds, BestCPUs: 1, BestMemGB: 1}}); !errors.Is(err, ErrReplay) {
			t.Errorf("speeds %.20q accepted: %v", speeds, err)
		}
	}
	if ModelOf(7, testModels) != "language" || ModelOf(8, testModels) != "image" {
		t.Error("ModelOf does not take the models in name order by job id")
	}
}

// Under Synergy the simulator sizes at submission and start as slurmctld
// does (AllocStart): a lone image job gets its best case, 9 CPUs per GPU,
// and runs 2.4 times as fast as under the proportional share.
func TestSimulateSizings(t *testing.T) {
	scaled, err := Scale(DefaultTraceSettings(), 20)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := SimProfiles(testModels)
	if err != nil {
		t.Fatal(err)
	}
	cluster := Side{Jobs: []Outcome{{ID: 1, SlurmID: 1, GPUs: 1, Model: "image", Duration: 24}}}
	shape := sim.Shape{Nodes: 1, GPUsPerNode: 4, CPUsPerNode: 12, MemGBNode: 48}
	costs := SimCosts{RequeueHold: RequeueHold, PassInterval: 1}
	var cs []Comparison
	for _, p := range []string{Synergy, Proportional} {
		side, _, err := Simulate(p, shape, scaled, costs, cluster, ps)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, Comparison{Policy: p, Cluster: side, Simulation: side})
	}
	if got := cs[0].Simulation.Jobs[0].End; got != 10 {
		t.Errorf("synergy: the image job ends at %g, want 10 (24 s at 2.4)", got)
	}
	if got := cs[1].Simulation.Jobs[0].End; got != 24 {
		t.Errorf("proportional: the image job ends at %g, want 24", got)
	}
	c, s, ok := SizingRatios(cs)
	if !ok || math.Abs(c-10.0/24) > 1e-9 || c != s {
		t.Errorf("sizing ratios %v %v %v", c, s, ok)
	}
	if _, _, err := Simulate(Synergy, shape, scaled, costs, cluster, nil); !errors.Is(err, ErrReplay) {
		t.Errorf("synergy without profiles: %v", err)
	}
}

// The simulator's backfill cycle is the loopback cluster's bf_interval.
func TestDefaultBackfillIntervalIsTheClustersBfInterval(t *testing.T) {
	b, err := os.ReadFile("../../../scripts/cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`SchedulerParameters=\S*\bbf_interval=(\d+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/cluster.sh sets no bf_interval")
	}
	if v, _ := strconv.Atoi(string(m[1])); float64(v) != DefaultBackfillInterval {
		t.Errorf("scripts/cluster.sh's bf_interval is %d, DefaultBackfillInterval %v", v, DefaultBackfillInterval)
	}
}
