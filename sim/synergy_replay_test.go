package sim

import (
	"errors"
	"testing"

	"github.com/lachesis-sched/lachesis/sim/trace"
)

// replayConfig is a small overloaded setting: 2 nodes × 8 GPUs at 4 jobs/h
// (offered load ≈ 4.2 at the proportional share).
func replayConfig(t *testing.T) (trace.SynergyWorkload, Window, []Variant) {
	base := DefaultConfig()
	base.Shape = Shape{Nodes: 2, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
	base.Profiles = profiles(t)
	base.Models = ModelsAsGiven
	base.Policy = PolicyFIFO
	variants := Variants(base, []string{PolicyFIFO}, []AllocMode{AllocProportional, AllocSynergy})
	return trace.SynergyWorkload{JobsPerHour: 4, Seed: 5}, Window{From: 100, To: 200}, variants
}

func TestReplaySynergyRunsUntilTheWindowHasFinished(t *testing.T) {
	w, win, variants := replayConfig(t)
	results, tr, err := ReplaySynergy(w, win, variants, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Jobs) <= int(win.To) {
		t.Fatalf("replayed %d jobs; an overloaded cluster needs arrivals beyond the window's %d", len(tr.Jobs), win.To)
	}
	last := tr.Jobs[len(tr.Jobs)-1].Submit
	for _, r := range results {
		for _, j := range r.Jobs {
			if win.contains(j.ID) && j.Finish > last {
				t.Fatalf("%s: window job %d finishes at %v, after the last arrival at %v", r.Policy, j.ID, j.Finish, last)
			}
		}
	}
	// More arrivals cannot change the window's JCTs.
	more := w
	more.Jobs = len(tr.Jobs) + 300
	longer, err := trace.GenerateSynergyJobs(more)
	if err != nil {
		t.Fatal(err)
	}
	again, err := RunAll(longer, variants, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range results {
		a, na := WindowAvgJCT(results[i], win)
		b, nb := WindowAvgJCT(again[i], win)
		if na != int(win.To-win.From) || a != b || na != nb {
			t.Errorf("%s: window average %v over %d jobs, %v over %d with 300 more arrivals; want equal, over %d", variants[i].Label, a, na, b, nb, win.To-win.From)
		}
	}
}

func TestReplaySynergyRefusesAnEmptyWindow(t *testing.T) {
	w, _, variants := replayConfig(t)
	if _, _, err := ReplaySynergy(w, Window{From: 5, To: 5}, variants, 1); !errors.Is(err, trace.ErrBadWorkload) {
		t.Fatalf("err = %v, want ErrBadWorkload", err)
	}
}
