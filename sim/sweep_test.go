package sim

import (
	"testing"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

func TestChosen_PrefersFewerPreemptionsAmongNearTies(t *testing.T) {
	mk := func(knob, regret float64, preemptions int) SweepRow {
		return SweepRow{Point: SweepPoint{Mode: priority.ModeLAS, Thresholds: []float64{3250}, PromoteKnob: knob},
			Regret: regret, Results: []Summary{{Preemptions: preemptions}}}
	}
	cases := []struct {
		name     string
		rows     []SweepRow
		wantKnob float64
	}{
		{"least regret wins when nothing is close", []SweepRow{mk(0, 1.00, 900), mk(1, 1.05, 100)}, 0},
		{"a near tie goes to fewer preemptions", []SweepRow{mk(0, 1.00, 900), mk(2, 1.005, 100)}, 2},
		{"equal preemptions go to the least regret", []SweepRow{mk(4, 1.008, 100), mk(2, 1.002, 100)}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Chosen(c.rows)
			if !ok || got.Point.PromoteKnob != c.wantKnob {
				t.Fatalf("chose %v, want knob %v", got.Point, c.wantKnob)
			}
		})
	}
	if _, ok := Chosen(nil); ok {
		t.Fatal("chose from nothing")
	}
}

func TestSetRegret_IsTheWorstRatioToEachSettingsBest(t *testing.T) {
	rows := []SweepRow{
		{Results: []Summary{{AvgJCT: 100}, {AvgJCT: 300}}},
		{Results: []Summary{{AvgJCT: 110}, {AvgJCT: 200}}},
	}
	setRegret(rows)
	if rows[0].Regret != 1.5 || rows[1].Regret != 1.1 {
		t.Fatalf("regrets %v, %v; want 1.5, 1.1", rows[0].Regret, rows[1].Regret)
	}
}

func TestSweep_RunsBothStagesOnEverySetting(t *testing.T) {
	tr := phillySlice(t, 120)
	a, b := DefaultConfig(), DefaultConfig()
	a.Shape.Nodes, b.Shape.Nodes = 5, 4
	settings := []SweepSetting{{"40 GPUs", a}, {"32 GPUs", b}}
	rows, err := Sweep(tr, settings, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := NumSweepRuns(); len(rows) != want || len(rows[0].Results) != 2 {
		t.Fatalf("%d rows of %d results, want %d of 2", len(rows), len(rows[0].Results), want)
	}
	for _, r := range rows {
		if r.Regret < 1 {
			t.Fatalf("%v: regret %v < 1", r.Point, r.Regret)
		}
	}
}
