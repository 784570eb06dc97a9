package sensitivity

import (
	"errors"
	"strings"
	"testing"
)

func TestReadThroughputCSV_BundledTableHasTwelveFullGrids(t *testing.T) {
	ps := loadProfiles(t)
	if len(ps) != 12 {
		t.Fatalf("got %d models, want 12", len(ps))
	}
	for name, p := range ps {
		if len(p.CPUs) != 9 || len(p.MemGB) != 5 {
			t.Errorf("%s: grid %d×%d, want 9×5", name, len(p.CPUs), len(p.MemGB))
		}
		if got := p.At(3, 62.5); got != 1 {
			t.Errorf("%s: throughput at the proportional share = %v, want 1 (the normalisation point)", name, got)
		}
	}
}

func TestReadThroughputCSV_RejectsMalformedInput(t *testing.T) {
	cases := map[string]string{
		"wrong header":     "model,cpus,mem,t\na,1,1,1\n",
		"missing grid row": "model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput\na,1,10,1\na,2,10,1\na,1,20,1\n",
		"duplicate row":    "model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput\na,1,10,1\na,1,10,2\n",
		"zero cpus":        "model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput\na,0,10,1\n",
		"negative tput":    "model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput\na,1,10,-1\n",
		"no rows":          "model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput\n",
		"short row":        "model,cpus_per_gpu,mem_gb_per_gpu,norm_throughput\na,1,10\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadThroughputCSV(strings.NewReader(in))
			if !errors.Is(err, ErrBadProfile) {
				t.Fatalf("err = %v, want ErrBadProfile", err)
			}
		})
	}
}

func TestAt_StepsDownBetweenGridPointsAndIsZeroBelowIt(t *testing.T) {
	p := loadProfiles(t)["res18"]
	cases := []struct {
		name      string
		cpus, mem float64
		want      float64
	}{
		{"on the grid", 9, 62.5, 2.4},
		{"between CPU rows takes the row below", 8, 62.5, 1.75},
		{"between memory columns takes the column below", 3, 100, 1.0},
		{"above the grid takes the top", 100, 1000, 2.4},
		{"below the CPU axis is unmeasured", 0.5, 62.5, 0},
		{"below the memory axis is unmeasured", 3, 10, 0},
		{"float noise on a grid value still hits it", 3, 500.0 / 8, 1.0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := p.At(c.cpus, c.mem); got != c.want {
				t.Fatalf("At(%v, %v) = %v, want %v", c.cpus, c.mem, got, c.want)
			}
		})
	}
}
