package profiler

import (
	"math"
	"slices"
	"testing"

	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

func TestMemoryModel_Throughput(t *testing.T) {
	// 100 GiB dataset, 1 MiB per sample, 1000 samples/s in memory: an
	// epoch of 102400 samples takes 102.4 s when CPU-bound.
	m := memoryModel{datasetBytes: 100 * gib, diskBW: 500 << 20, memBW: 10 * gib, bytesPerUnit: 1 << 20}
	cases := []struct {
		name  string
		model memoryModel
		cache float64
		want  float64
	}{
		{"all cached: CPU-bound, as swept", m, 100 * gib, 1000},
		{"cache beyond the dataset buys nothing more", m, 500 * gib, 1000},
		{"nothing cached: the disk's 204.8 s epoch halves throughput", m, 0, 1000 * 102.4 / 204.8},
		{"half cached: 5 s from memory plus 102.4 s from disk still binds", m, 50 * gib, 1000 * 102.4 / (5 + 102.4)},
		{"three quarters cached: disk time below CPU time, CPU-bound", m, 75 * gib, 1000},
		{"no dataset: insensitive", memoryModel{}, 0, 1000},
		{"bytes per sample unknown: insensitive", memoryModel{datasetBytes: 100 * gib, diskBW: 1, memBW: 1}, 0, 1000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.model.throughput(1000, c.cache); !near(got, c.want) {
				t.Fatalf("throughput = %v, want %v", got, c.want)
			}
		})
	}
}

func TestMemoryGrid(t *testing.T) {
	synergyShare := nodeShare(24, 8, 500*gib)
	cases := []struct {
		name      string
		gpus      int
		footprint int64
		dataset   int64
		share     share
		want      []float64
	}{
		{"a small dataset collapses to the 1 GB floor and the share", 1, 20 << 20, 16 << 20,
			nodeShare(2, 1, 4*gib), []float64{1, 4}},
		{"a large dataset spans footprint to all cached, share included", 1, 2 * gib, 60 * gib,
			synergyShare, []float64{2, 17, 32, 47, 62, 62.5}},
		{"two GPUs split footprint and dataset, rounded up to quarter GB", 2, 3 * gib, 10 * gib,
			synergyShare, []float64{1.5, 2.75, 4, 5.25, 6.5, 62.5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := memoryGrid(c.gpus, c.footprint, c.dataset, c.share); !slices.EqualFunc(got, c.want, near) {
				t.Fatalf("grid = %v, want %v", got, c.want)
			}
		})
	}
}

func TestNodeShare_IsTheNodeDividedByItsGPUs(t *testing.T) {
	cases := []struct {
		name       string
		cpus, gpus int
		mem        int64
		wantCPUs   int
		wantMem    float64
	}{
		{"Synergy's server", 24, 8, 500 * gib, 3, 62.5},
		{"a CPU-only 2-core node is one share", 2, 1, 8 * gib, 2, 8},
		{"more GPUs than CPUs still gives a CPU", 4, 8, 64 * gib, 1, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := nodeShare(c.cpus, c.gpus, c.mem)
			if s.cpusPerGPU != c.wantCPUs || !near(s.memGiBPerGPU, c.wantMem) {
				t.Fatalf("share %+v, want %d CPUs, %v GB", s, c.wantCPUs, c.wantMem)
			}
		})
	}
}

// res18's CPU row from Synergy's table as a recorded sweep (in samples/s),
// on Synergy's server (24 CPUs, 8 GPUs, 500 GB), with a dataset that fits
// the 62.5 GB share only when cached whole and a disk too slow to feed 9
// CPUs' worth of samples: the matrix puts the best case at 9 CPUs and
// 62.5 GB per GPU, Synergy's summary for res18, and is 1.0 at the share.
func TestBuildMatrix_Res18OnSynergysServer(t *testing.T) {
	profiles, _ := synergyReference(t)
	ref := profiles["res18"]
	var sweep []profile.Measurement
	for i, c := range ref.CPUs {
		sweep = append(sweep, profile.Measurement{CPUs: c, Throughput: 400 * ref.Throughput[i][len(ref.MemGB)-1]})
	}
	// ~110 KiB per sample (an ImageNet JPEG); 20 MiB/s is a disk reading
	// small files at random.
	mm := memoryModel{datasetBytes: 60.5 * gib, diskBW: 20 << 20, memBW: 8 * gib, bytesPerUnit: 110 << 10}
	p, err := buildMatrix("res18", sweep, 1, 2*gib, mm, nodeShare(24, 8, 500*gib))
	if err != nil {
		t.Fatal(err)
	}
	best, _ := p.BestCase(sensitivity.DefaultTolerance)
	if best != (sensitivity.Demand{CPUsPerGPU: 9, MemGBPerGPU: 62.5}) {
		t.Errorf("best case %+v, want 9 CPUs, 62.5 GB\n%v\n%v", best, p.MemGB, p.Throughput)
	}
	if v := p.At(3, 62.5); !near(v, 1) {
		t.Errorf("throughput at the proportional share = %v, want 1", v)
	}
	if v := p.At(9, p.MemGB[0]); v >= 0.6 {
		t.Errorf("9 CPUs with nothing cached = %v of the share; the disk should bind", v)
	}
}

func TestBuildMatrix_InsensitiveModelNeedsOneCPUAndTheFloor(t *testing.T) {
	sweep := []profile.Measurement{{CPUs: 1, Throughput: 50}, {CPUs: 3, Throughput: 50}, {CPUs: 6, Throughput: 50}}
	p, err := buildMatrix("gnmt", sweep, 1, 100<<20, memoryModel{}, nodeShare(24, 8, 500*gib))
	if err != nil {
		t.Fatal(err)
	}
	if best, _ := p.BestCase(0.1); best != (sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: memFloorGiB}) {
		t.Fatalf("best case %+v, want 1 CPU and %v GB", best, memFloorGiB)
	}
}
