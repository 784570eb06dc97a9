package sim

import (
	"math"
	"slices"
	"testing"

	"github.com/lachesis-sched/lachesis/sim/trace"
)

// Every base variant runs under every heterogeneous policy and
// consolidation setting, labelled base/policy[+consolidate], each with
// its own copy of the cluster's types.
func TestHeteroVariantsCrossEveryBaseWithEveryPolicyAndSetting(t *testing.T) {
	base := Variants(DefaultConfig(), []string{PolicyFIFO, "gittins"}, []AllocMode{AllocProportional})
	proto := HeteroConfig{Table: gavelTable(t), Types: []string{"k80", "v100"}, Reference: "p100", SensitiveBelow: 0.7}
	got := HeteroVariants(base, proto, []HeteroPolicy{HeteroAgnostic, HeteroEffective}, []bool{true, false})
	var labels []string
	for _, v := range got {
		labels = append(labels, v.Label)
		h := v.Config.Hetero
		if h == nil || h.Table != proto.Table || h.Reference != "p100" || h.SensitiveBelow != 0.7 || !slices.Equal(h.Types, proto.Types) {
			t.Fatalf("%s: hetero config %+v", v.Label, h)
		}
	}
	want := []string{
		"fifo/agnostic+consolidate", "fifo/agnostic", "fifo/effective+consolidate", "fifo/effective",
		"gittins/agnostic+consolidate", "gittins/agnostic", "gittins/effective+consolidate", "gittins/effective",
	}
	if !slices.Equal(labels, want) {
		t.Fatalf("labels %q\nwant %q", labels, want)
	}
	got[0].Config.Hetero.Types[0] = "changed"
	if got[1].Config.Hetero.Types[0] != "k80" || proto.Types[0] != "k80" {
		t.Fatal("variants share their types")
	}
}

func TestSweepSettingsOnNameEachClusterByItsGPUs(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Shape.GPUsPerNode = 8
	got := SweepSettingsOn(cfg, []int{64, 4})
	if len(got) != 2 || got[0].Name != "512 GPUs" || got[1].Name != "32 GPUs" || got[1].Config.Shape.Nodes != 4 || cfg.Shape.Nodes == 4 {
		t.Fatalf("got %+v", got)
	}
}

// A synergy replay runs each list under proportional, start-time and
// Synergy allocation, and each row holds its list's window averages.
func TestRunSynergyReplayGivesARowPerListPolicyAndReserve(t *testing.T) {
	base := DefaultConfig()
	base.Shape = Shape{Nodes: 16, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	base.Profiles = profiles(t)
	base.Models = ModelsAsGiven
	if err := CheckSynergyModels(base.Profiles); err != nil {
		t.Fatal(err)
	}
	plan := SynergyReplayPlan{Workload: trace.SynergyWorkload{Split: [3]float64{20, 70, 10}}, Rates: []float64{9}, Seeds: []uint64{1},
		Policies: []string{PolicyFIFO}, Reserves: []float64{1, 0.5}, Base: base, Parallel: 2}
	var lists int
	plan.Simulated = func(rate float64, seed uint64, jobs int) {
		lists++
		if rate != 9 || seed != 1 || jobs < int(SynergyWindow.To) {
			t.Errorf("told of list %g/%d with %d jobs", rate, seed, jobs)
		}
	}
	rows, err := RunSynergyReplay(plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || lists != 1 {
		t.Fatalf("%d rows, %d lists: want 2 rows of one list", len(rows), lists)
	}
	for _, r := range rows {
		if r.WindowJobs != int(SynergyWindow.To-SynergyWindow.From) || !(r.Load > 0) || r.Policy != PolicyFIFO ||
			!(r.ProportionalJCT > 0) || !(r.SynergyJCT > 0) || !(r.StartJCT > 0) || math.IsNaN(r.SynergySpeed) {
			t.Fatalf("row %+v", r)
		}
	}
	if rows[0].Reserve != 1 || rows[1].Reserve != 0.5 || rows[0].ProportionalJCT != rows[1].ProportionalJCT || rows[0].StartJCT != rows[1].StartJCT {
		t.Fatalf("the reserves' rows do not share their list's proportional and start-time runs: %+v", rows)
	}
	// The rows are the window averages of the runs themselves.
	results, _, err := ReplaySynergy(trace.SynergyWorkload{Split: [3]float64{20, 70, 10}, JobsPerHour: 9, Seed: 1}, SynergyWindow,
		SynergyReplayVariants(base, []string{PolicyFIFO}, []float64{0.5}), 2)
	if err != nil {
		t.Fatal(err)
	}
	if jct, _ := WindowAvgJCT(results[2], SynergyWindow); jct != rows[1].SynergyJCT {
		t.Fatalf("reserve 0.5: row says %v, its run %v", rows[1].SynergyJCT, jct)
	}
}

func TestCheckSynergyModelsRefusesATableWithoutOne(t *testing.T) {
	table := profiles(t)
	delete(table, trace.SynergyTaskModels[0].Models[0])
	if err := CheckSynergyModels(table); err == nil {
		t.Fatal("a table without a workload model accepted")
	}
}
