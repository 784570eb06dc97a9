package sensitivity

import (
	"errors"
	"testing"
)

// synergyNode is the server the bundled profiles come from.
var synergyNode = Resources{GPUs: 8, CPUs: 24, MemGB: 500}

func TestProportional_IsTheGPUFractionOfTheNode(t *testing.T) {
	cases := []struct {
		name string
		node Resources
		gpus int
		want Allocation
	}{
		{"one GPU of eight", synergyNode, 1, Allocation{GPUs: 1, CPUs: 3, MemGB: 62.5}},
		{"whole node", synergyNode, 8, Allocation{GPUs: 8, CPUs: 24, MemGB: 500}},
		{"CPUs round down", Resources{GPUs: 8, CPUs: 20, MemGB: 100}, 1, Allocation{GPUs: 1, CPUs: 2, MemGB: 12.5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Proportional(c.node, c.gpus); got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestAllocate_FullReserve(t *testing.T) {
	res18 := Demand{9, 62.5}
	gnmt := Demand{1, 20.83}
	alexnet := Demand{12, 125}
	cases := []struct {
		name    string
		free    Resources
		gpus    int
		best    Demand
		want    Allocation
		wantErr bool
	}{
		{
			name: "empty node keeps the other GPUs' share, so a sensitive model gets only its own",
			free: synergyNode, gpus: 1, best: res18,
			want: Allocation{GPUs: 1, CPUs: 3, MemGB: 62.5, Outcome: FellBack},
		},
		{
			name: "a model whose best case needs no more CPUs gets it on an empty node",
			free: synergyNode, gpus: 1, best: Demand{3, 62.5},
			want: Allocation{GPUs: 1, CPUs: 3, MemGB: 62.5, Outcome: GotBestCase},
		},
		{
			name: "insensitive model gets its best case below the proportional share",
			free: synergyNode, gpus: 2, best: gnmt,
			want: Allocation{GPUs: 2, CPUs: 2, MemGB: 41.66, Outcome: GotBestCase},
		},
		{
			name: "headroom short of the best case falls back, but not below the share",
			// 3 GPUs free with exactly their share: nothing to spare.
			free: Resources{GPUs: 3, CPUs: 9, MemGB: 187.5}, gpus: 1, best: res18,
			want: Allocation{GPUs: 1, CPUs: 3, MemGB: 62.5, Outcome: FellBack},
		},
		{
			name: "slack left by insensitive jobs is used, keeping the other GPUs' share",
			// 4 GPUs free, 18 CPUs: 3 GPUs keep 9 CPUs, so 9 are spare.
			free: Resources{GPUs: 4, CPUs: 18, MemGB: 400}, gpus: 1, best: alexnet,
			want: Allocation{GPUs: 1, CPUs: 9, MemGB: 125, Outcome: FellBack},
		},
		{
			name: "last free GPU may take everything left on the node",
			free: Resources{GPUs: 1, CPUs: 20, MemGB: 300}, gpus: 1, best: alexnet,
			want: Allocation{GPUs: 1, CPUs: 12, MemGB: 125, Outcome: GotBestCase},
		},
		{
			name: "node filled by other means gives what is free if it covers the minimum",
			free: Resources{GPUs: 2, CPUs: 3, MemGB: 62.5}, gpus: 1, best: res18,
			want: Allocation{GPUs: 1, CPUs: 3, MemGB: 62.5, Outcome: FellBack},
		},
		{
			name: "below the minimum does not fit",
			free: Resources{GPUs: 2, CPUs: 2, MemGB: 500}, gpus: 1, best: res18,
			wantErr: true,
		},
		{
			name: "too few GPUs does not fit",
			free: Resources{GPUs: 1, CPUs: 24, MemGB: 500}, gpus: 2, best: gnmt,
			wantErr: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Allocator{Node: synergyNode, Reserve: DefaultReserve}
			got, err := a.Allocate(c.free, c.gpus, c.best)
			if try, ok := a.TryAllocate(c.free, c.gpus, c.best); ok != (err == nil) || try != got {
				t.Fatalf("TryAllocate = %+v, %v; Allocate = %+v, %v", try, ok, got, err)
			}
			if c.wantErr {
				if !errors.Is(err, ErrDoesNotFit) {
					t.Fatalf("err = %v, want ErrDoesNotFit", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			if got.CPUs > c.free.CPUs || got.MemGB > c.free.MemGB+1e-9 {
				t.Fatalf("allocation %+v exceeds what is free %+v", got, c.free)
			}
		})
	}
}

func TestAllocate_PartialReserve(t *testing.T) {
	res18 := Demand{9, 62.5}
	cases := []struct {
		name    string
		reserve float64
		free    Resources
		want    Allocation
		wantErr bool
	}{
		{"no reserve: empty node gives the best case", 0, synergyNode,
			Allocation{GPUs: 1, CPUs: 9, MemGB: 62.5, Outcome: GotBestCase}, false},
		{"half reserve keeps 11 of 21 CPUs back", 0.5, synergyNode,
			Allocation{GPUs: 1, CPUs: 9, MemGB: 62.5, Outcome: GotBestCase}, false},
		{"half reserve on a busier node falls back", 0.5, Resources{GPUs: 4, CPUs: 12, MemGB: 250},
			Allocation{GPUs: 1, CPUs: 7, MemGB: 62.5, Outcome: FellBack}, false},
		{"no reserve can leave a later job below its minimum", 0, Resources{GPUs: 7, CPUs: 2, MemGB: 400},
			Allocation{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Allocator{Node: synergyNode, Reserve: c.reserve}.Allocate(c.free, 1, res18)
			if c.wantErr {
				if !errors.Is(err, ErrDoesNotFit) {
					t.Fatalf("err = %v, want ErrDoesNotFit", err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

// Filling a node job by job with Allocate never strands a GPU: whatever mix
// of models arrives, every GPU of the node can be handed out.
func TestAllocate_FillingANodeNeverStrandsAGPU(t *testing.T) {
	ps := loadProfiles(t)
	names := ps.Names()
	for start := range names {
		free := synergyNode
		for k := 0; free.GPUs > 0; k++ {
			best, _ := ps[names[(start+k*5)%len(names)]].BestCase(DefaultTolerance)
			a, err := Allocator{Node: synergyNode, Reserve: DefaultReserve}.Allocate(free, 1, best)
			if err != nil {
				t.Fatalf("start %d, job %d: %v with %+v free", start, k, err, free)
			}
			free.GPUs -= a.GPUs
			free.CPUs -= a.CPUs
			free.MemGB -= a.MemGB
			if free.CPUs < 0 || free.MemGB < -1e-9 {
				t.Fatalf("over-committed: %+v", free)
			}
		}
	}
}
