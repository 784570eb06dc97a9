package sim

import (
	"fmt"
	"reflect"
	"testing"
)

// Every policy × allocation × restart penalty on a busy slice of the Philly
// trace, squeezed onto 4 nodes so that jobs queue and get preempted.
func TestInvariants_HoldForEveryPolicyOnAPhillySlice(t *testing.T) {
	trace := phillySlice(t, 700)
	ps := profiles(t)
	for _, alloc := range []AllocMode{AllocProportional, AllocSynergy, AllocStart} {
		for _, penalty := range []float64{0, 60} {
			for _, pol := range PolicyNames {
				name := fmt.Sprintf("%s/%s/penalty=%v", pol, alloc, penalty)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					cfg := DefaultConfig()
					cfg.Shape.Nodes = 4
					cfg.Policy, cfg.Alloc, cfg.Profiles, cfg.RestartPenalty = pol, alloc, ps, penalty
					cfg.PolicyOptions.Tiresias.PromoteKnob = 4
					cfg.RecordRuns = true
					r := runOK(t, cfg, trace)
					checkInvariants(t, trace, cfg, r)
					p, _ := NewPolicy(pol, cfg.PolicyOptions)
					if !p.Preemptive && r.Summary.Preemptions != 0 {
						t.Fatalf("non-preemptive %s preempted %d times", pol, r.Summary.Preemptions)
					}
					// The slice must exercise preemption, or the invariants
					// above say nothing about it.
					if p.Preemptive && r.Summary.Preemptions == 0 {
						t.Fatalf("%s never preempted on the test slice", pol)
					}
				})
			}
		}
	}
}

func TestInvariants_HoldInGPUCountingMode(t *testing.T) {
	trace := phillySlice(t, 800)
	for _, pol := range PolicyNames {
		t.Run(pol, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Shape = Shape{Nodes: 4, GPUsPerNode: 8, GPUCountOnly: true}
			cfg.Policy, cfg.RecordRuns, cfg.PassInterval = pol, true, 0
			checkInvariants(t, trace, cfg, runOK(t, cfg, trace))
		})
	}
}

func TestDeterminism_SameSeedGivesIdenticalResults(t *testing.T) {
	trace := phillySlice(t, 1000)
	ps := profiles(t)
	base := DefaultConfig()
	base.Shape.Nodes = 4
	base.Profiles, base.Alloc, base.Seed = ps, AllocSynergy, 7
	variants := Variants(base, []string{PolicyFIFOSkip, PolicySRTF, PolicyLAS, PolicyGittins}, []AllocMode{AllocSynergy})
	parallel, err := RunAll(trace, variants, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range variants {
		again := runOK(t, v.Config, trace)
		if !reflect.DeepEqual(again.Jobs, parallel[i].Jobs) || again.Summary != parallel[i].Summary {
			t.Fatalf("%s: a second run with the same seed differs", v.Label)
		}
	}
}

func TestDeterminism_SeedChangesTheModelDraw(t *testing.T) {
	trace := phillySlice(t, 200)
	cfg := DefaultConfig()
	cfg.Profiles = profiles(t)
	cfg.Seed = 1
	a := runOK(t, cfg, trace)
	cfg.Seed = 2
	b := runOK(t, cfg, trace)
	same := 0
	for i := range a.Jobs {
		if a.Jobs[i].Model == b.Jobs[i].Model {
			same++
		}
	}
	// 12 models: about one job in twelve keeps its model by chance.
	if same > len(a.Jobs)/4 {
		t.Fatalf("%d of %d jobs drew the same model under two seeds", same, len(a.Jobs))
	}
}

// A job's model depends on the seed and its own ID only, not on which slice
// of the trace is simulated.
func TestModelRule_IsStableUnderSlicing(t *testing.T) {
	ps := profiles(t)
	cfg := DefaultConfig()
	cfg.Profiles = ps
	whole := runOK(t, cfg, phillySlice(t, 300))
	ph := philly(t)
	part, err := ph.Select(Filter{FromSec: 28 * 86400, Skip: 100, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	sliced := runOK(t, cfg, part)
	byID := map[uint32]string{}
	for _, j := range whole.Jobs {
		byID[j.ID] = j.Model
	}
	for _, j := range sliced.Jobs {
		if byID[j.ID] != j.Model {
			t.Fatalf("job %d: model %q in the slice, %q in the whole", j.ID, j.Model, byID[j.ID])
		}
	}
}
