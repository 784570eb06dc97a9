package sim

import (
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// gavelSample is a few rows of Gavel's table, as measured.
const gavelSample = `gpu_type,placement,model,batch_size,num_gpus,throughput
k80,consolidated,A3C,0,1,3.438768
p100,consolidated,A3C,0,1,5.681346
v100,consolidated,A3C,0,1,7.175767
k80,consolidated,LM,5,2,32.385512
k80,unconsolidated,LM,5,2,22.128257
p100,consolidated,LM,5,2,76.921901
p100,unconsolidated,LM,5,2,38.751525
v100,consolidated,LM,5,2,185.723831
v100,unconsolidated,LM,5,2,40.352147
k80,consolidated,LM,5,4,44.089476
k80,unconsolidated,LM,5,4,32.560096
p100,consolidated,LM,5,4,110.216611
p100,unconsolidated,LM,5,4,55.374427
v100,consolidated,LM,5,4,126.715718
v100,unconsolidated,LM,5,4,44.895582
k80,consolidated,LM,5,8,76.863106
p100,consolidated,LM,5,8,133.52409
v100,consolidated,LM,5,8,698.773293
k80,consolidated,ResNet-50,128,2,0.0
p100,consolidated,ResNet-50,128,2,2.880898
p100,unconsolidated,ResNet-50,128,2,2.895454
v100,consolidated,ResNet-50,128,2,4.223015
v100,unconsolidated,ResNet-50,128,2,4.334148
`

func gavelTable(t *testing.T) *GavelTable {
	t.Helper()
	tab, err := ReadGavelCSV(strings.NewReader(gavelSample))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestGavelSpeed(t *testing.T) {
	tab := gavelTable(t)
	lm5 := GavelModel{"LM", 5}
	r50 := GavelModel{"ResNet-50", 128}
	cases := []struct {
		name string
		m    GavelModel
		gpus int
		typ  string
		cons Consolidation
		want float64
	}{
		{"reference type consolidated is speed 1", lm5, 2, "p100", Consolidated, 1},
		{"faster type is the throughput ratio", lm5, 8, "v100", Consolidated, 698.773293 / 133.52409},
		{"spread uses the unconsolidated row", lm5, 4, "v100", Spread, 44.895582 / 110.216611},
		{"single GPU spread is consolidated", GavelModel{"A3C", 0}, 1, "k80", Spread, 3.438768 / 5.681346},
		{"3 GPUs take the 2-GPU ratio", lm5, 3, "k80", Consolidated, 32.385512 / 76.921901},
		{"16 GPUs take the 8-GPU ratio", lm5, 16, "v100", Consolidated, 698.773293 / 133.52409},
		{"zero throughput cannot run", r50, 2, "k80", Consolidated, 0},
		{"unmeasured spread cannot run", lm5, 8, "v100", Spread, 0},
		{"model without the reference row cannot run", GavelModel{"CycleGAN", 0}, 1, "v100", Consolidated, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tab.Speed(c.m, c.gpus, c.typ, c.cons, "p100")
			if math.Abs(got-c.want) > 1e-12 {
				t.Fatalf("Speed = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGavelAssign(t *testing.T) {
	f, err := os.Open(refData(t, "gavel/throughputs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := ReadGavelCSV(f)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		gpus    int
		allowed []string // models that may be drawn
		all     bool     // every allowed model is drawn over 2000 IDs
	}{
		{"single-GPU jobs draw every model", 1, []string{"A3C", "CycleGAN", "LM", "Recommendation", "ResNet-18", "ResNet-50", "Transformer"}, true},
		{"multi-GPU jobs draw only models measured at their GPU count", 4, []string{"LM", "ResNet-18", "ResNet-50", "Transformer"}, true},
		{"32-GPU jobs draw models measured at 8", 32, []string{"LM", "ResNet-18", "ResNet-50", "Transformer"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			seen := map[string]bool{}
			for id := uint32(1); id <= 2000; id++ {
				job := Job{ID: id, GPUs: c.gpus}
				m, ok := tab.GavelAssign(&job, "p100", 7)
				if !ok {
					t.Fatalf("job %d: no model", id)
				}
				again, _ := tab.GavelAssign(&Job{ID: id, GPUs: c.gpus, Submit: 99}, "p100", 7)
				if again != m {
					t.Fatalf("job %d drew %v then %v: the draw must depend on seed, ID and GPUs only", id, m, again)
				}
				if !strings.Contains(strings.Join(c.allowed, ","), m.Model) {
					t.Fatalf("job %d drew %v, not among %v", id, m, c.allowed)
				}
				if v, ok := tab.Throughput(m, "p100", Consolidated, tab.TableGPUs(c.gpus)); !ok || v <= 0 {
					t.Fatalf("job %d drew %v, which has no reference figure", id, m)
				}
				seen[m.Model] = true
			}
			if c.all && len(seen) != len(c.allowed) {
				t.Fatalf("drew %v, want all of %v", seen, c.allowed)
			}
		})
	}
	differ := 0
	for id := uint32(1); id <= 100; id++ {
		a, _ := tab.GavelAssign(&Job{ID: id, GPUs: 1}, "p100", 1)
		b, _ := tab.GavelAssign(&Job{ID: id, GPUs: 1}, "p100", 2)
		if a != b {
			differ++
		}
	}
	if differ < 50 {
		t.Fatalf("seeds 1 and 2 drew the same model for %d of 100 jobs; the seed must matter", 100-differ)
	}
}

// heteroRun simulates jobs on a heterogeneous cluster with promotion and
// demotion out of the way, and returns the engine after the run.
func heteroRun(t *testing.T, shape Shape, h HeteroConfig, jobs []Job) *engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Shape = shape
	cfg.Policy = PolicyLAS
	cfg.PolicyOptions.Tiresias.FixThresholds([]float64{1e12})
	cfg.PolicyOptions.Tiresias.PromoteKnob = 0
	cfg.RecordRuns = true
	h.Table = gavelTable(t)
	cfg.Hetero = &h
	tr := &Trace{Name: "hetero", Jobs: jobs}
	if err := tr.Normalise(); err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.loop(); err != nil {
		t.Fatal(err)
	}
	return e
}

// runsOf is the job's recorded runs.
func runsOf(e *engine, id uint32) []RunRecord {
	var out []RunRecord
	for _, r := range e.runs {
		if r.JobID == id {
			out = append(out, r)
		}
	}
	return out
}

func TestHeteroPlacement(t *testing.T) {
	twoTypes := Shape{Nodes: 2, GPUsPerNode: 1, CPUsPerNode: 4, MemGBNode: 64} // node 0 k80, node 1 v100
	eff := HeteroConfig{Types: []string{"k80", "v100"}, Reference: "p100", Policy: HeteroEffective, Consolidate: true}
	t.Run("fast-type job lands on the fast type when it is free", func(t *testing.T) {
		e := heteroRun(t, twoTypes, eff, []Job{{ID: 1, GPUs: 1, Duration: 1000, Model: "A3C"}})
		r := runsOf(e, 1)
		if len(r) != 1 || r[0].Slots[0].Node != 1 {
			t.Fatalf("runs %+v, want one run on node 1 (v100)", r)
		}
		if want := 1000 / (7.175767 / 5.681346); math.Abs(e.jobs[0].Finish-want) > 1e-6 {
			t.Fatalf("finished at %v, want %v (trace duration / v100 speed)", e.jobs[0].Finish, want)
		}
	})
	t.Run("job goes to the slow type at once when only that is free", func(t *testing.T) {
		e := heteroRun(t, twoTypes, eff, []Job{
			{ID: 1, GPUs: 1, Duration: 5000, Model: "A3C"},
			{ID: 2, GPUs: 1, Submit: 10, Duration: 1000, Model: "A3C"},
		})
		r := runsOf(e, 2)
		if len(r) != 1 || r[0].Slots[0].Node != 0 || r[0].Start != 10 {
			t.Fatalf("runs %+v, want one run on node 0 (k80) from t=10", r)
		}
	})
	t.Run("type-agnostic job takes its rotation's type even when a faster one is free", func(t *testing.T) {
		agn := eff
		agn.Policy = HeteroAgnostic
		// Job 2: rotation starts at 2 mod 2 = 0, the k80.
		e := heteroRun(t, twoTypes, agn, []Job{{ID: 2, GPUs: 1, Duration: 1000, Model: "A3C"}})
		if r := runsOf(e, 2); len(r) != 1 || r[0].Slots[0].Node != 0 {
			t.Fatalf("runs %+v, want one run on node 0 (k80)", r)
		}
	})
	t.Run("job never runs on a type where it did not run in Gavel's measurements", func(t *testing.T) {
		// ResNet-50/bs128 on 2 GPUs has throughput 0 on k80.
		shape := Shape{Nodes: 2, GPUsPerNode: 2, CPUsPerNode: 4, MemGBNode: 64}
		e := heteroRun(t, shape, eff, []Job{
			{ID: 1, GPUs: 2, Duration: 5000, Model: "ResNet-50/bs128"},
			{ID: 2, GPUs: 2, Submit: 10, Duration: 100, Model: "ResNet-50/bs128"},
		})
		if r := runsOf(e, 2); len(r) != 1 || r[0].Slots[0].Node != 1 || r[0].Start < 5000/(4.223015/2.880898) {
			t.Fatalf("runs %+v, want it to wait for node 1 (v100)", r)
		}
	})

	// One type, 3 nodes × 2 GPUs. Jobs 1 and 2 fill node 0, job 3 half of
	// node 1; job 2 ends at 10, leaving 1+1+2 GPUs free on three nodes.
	// The 4-GPU LM job (spread/consolidated = 0.35 on v100) arrives at 5.
	frag := Shape{Nodes: 3, GPUsPerNode: 2, CPUsPerNode: 4, MemGBNode: 64}
	fragJobs := []Job{
		{ID: 1, GPUs: 1, Duration: 1000, Model: "A3C"},
		{ID: 2, GPUs: 1, Duration: 10, Model: "A3C"},
		{ID: 3, GPUs: 1, Duration: 1000, Model: "A3C"},
		{ID: 4, GPUs: 4, Submit: 5, Duration: 100, Model: "LM/bs5"},
	}
	one := HeteroConfig{Types: []string{"v100"}, Reference: "v100", Policy: HeteroEffective}
	cases := []struct {
		name        string
		consolidate bool
		nodes       int
		start       float64
	}{
		{"sensitive 4-GPU job on 2-GPU nodes waits for 2 nodes with consolidation on", true, 2, 1000},
		{"sensitive 4-GPU job spreads over 3 nodes at once with consolidation off", false, 3, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := one
			h.Consolidate = c.consolidate
			e := heteroRun(t, frag, h, fragJobs)
			r := runsOf(e, 4)
			if len(r) != 1 || len(r[0].Slots) != c.nodes || r[0].Start != c.start {
				t.Fatalf("runs %+v, want one run on %d nodes from t=%v", r, c.nodes, c.start)
			}
			speed := 1.0
			if c.nodes == 3 {
				speed = 44.895582 / 126.715718
			}
			if got, want := r[0].End-r[0].Start, 100/speed; math.Abs(got-want) > 1e-6 {
				t.Fatalf("ran %v s, want %v (speed %v)", got, want, speed)
			}
		})
	}
}

func TestHeteroService(t *testing.T) {
	shape := Shape{Nodes: 1, GPUsPerNode: 2, CPUsPerNode: 4, MemGBNode: 64}
	speed := 185.723831 / 76.921901 // LM/bs5, 2 GPUs, v100 over p100
	cases := []struct {
		name   string
		policy HeteroPolicy
		want   float64
	}{
		// 1000 s of p100 work take 1000/speed s on the v100.
		{"effective service grows by the speed factor: reference GPU-seconds", HeteroEffective, 2 * 1000},
		{"type-agnostic service is GPU-seconds held", HeteroAgnostic, 2 * 1000 / speed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := HeteroConfig{Types: []string{"v100"}, Reference: "p100", Policy: c.policy}
			e := heteroRun(t, shape, h, []Job{{ID: 1, GPUs: 2, Duration: 1000, Model: "LM/bs5"}})
			if got := e.jobs[0].Account.ServiceClosed; math.Abs(got-c.want) > 1e-6 {
				t.Fatalf("service %v, want %v", got, c.want)
			}
		})
	}
}

func TestHeteroRejects(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Shape = Shape{Nodes: 4, GPUsPerNode: 2, CPUsPerNode: 4, MemGBNode: 64}
	tr := &Trace{Name: "x", Jobs: []Job{{ID: 1, GPUs: 1, Duration: 10}}}
	if err := tr.Normalise(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		h    HeteroConfig
	}{
		{"nodes not a multiple of the types", HeteroConfig{Types: []string{"k80", "p100", "v100"}, Reference: "p100", Policy: HeteroEffective}},
		{"type not in the table", HeteroConfig{Types: []string{"a100"}, Reference: "p100", Policy: HeteroEffective}},
		{"unknown policy", HeteroConfig{Types: []string{"v100"}, Reference: "p100", Policy: "fastest"}},
	}
	for _, c := range cases {
		t.Run(c.name+" is a config error", func(t *testing.T) {
			h := c.h
			h.Table = gavelTable(t)
			cfg.Hetero = &h
			if _, err := Run(cfg, tr); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("err = %v, want %v", err, ErrBadConfig)
			}
		})
	}
}

// TestHeteroInvariantsOnPhilly runs a busy Philly slice on three types
// under every heterogeneous setting and checks each recorded run: on one
// type only, one the job's model ran on, spread only where allowed, and
// no job finishing faster than its fastest run allows.
func TestHeteroInvariantsOnPhilly(t *testing.T) {
	f, err := os.Open(refData(t, "gavel/throughputs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ReadGavelCSV(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	trace := phillySlice(t, 3000)
	for _, pol := range []HeteroPolicy{HeteroAgnostic, HeteroEffective} {
		for _, cons := range []bool{true, false} {
			h := &HeteroConfig{Table: tab, Types: []string{"k80", "p100", "v100"}, Reference: "p100", Policy: pol, Consolidate: cons}
			t.Run(h.Label()+" keeps every run on one allowed type", func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Shape = Shape{Nodes: 12, GPUsPerNode: 8, CPUsPerNode: 24, MemGBNode: 500}
				cfg.Policy = PolicyGittins
				cfg.RecordRuns = true
				cfg.Hetero = h
				e, err := newEngine(cfg, trace)
				if err != nil {
					t.Fatal(err)
				}
				if err := e.loop(); err != nil {
					t.Fatal(err)
				}
				byID := map[uint32]*JobState{}
				for i := range e.jobs {
					byID[e.jobs[i].Job.ID] = &e.jobs[i]
				}
				het := e.cluster.het
				spread := 0
				for _, r := range e.runs {
					j := byID[r.JobID]
					typ := het.typeOf[r.Slots[0].Node]
					gpus := 0
					for _, s := range r.Slots {
						gpus += s.GPUs
						if het.typeOf[s.Node] != typ {
							t.Fatalf("job %d ran on types %d and %d at once", r.JobID, typ, het.typeOf[s.Node])
						}
					}
					if gpus != j.Job.GPUs {
						t.Fatalf("job %d ran on %d GPUs, asked for %d", r.JobID, gpus, j.Job.GPUs)
					}
					if j.het.speed[typ][Consolidated] <= 0 {
						t.Fatalf("job %d (%v) ran on type %d where it cannot", r.JobID, j.het.model, typ)
					}
					if len(r.Slots) > (gpus+7)/8 {
						spread++
						if j.het.speed[typ][Spread] <= 0 || (cons && j.het.sensitive[typ]) {
							t.Fatalf("job %d (%v) spread on type %d, which it may not", r.JobID, j.het.model, typ)
						}
					}
				}
				for i := range e.jobs {
					j := &e.jobs[i]
					if jct := j.Finish - j.Job.Submit; jct < j.Job.Duration/j.maxSpeed-1e-6 {
						t.Fatalf("job %d: JCT %v below duration/fastest speed %v", j.Job.ID, jct, j.Job.Duration/j.maxSpeed)
					}
				}
				if spread != het.spreads {
					t.Fatalf("%d spread runs recorded, summary counts %d", spread, het.spreads)
				}
			})
		}
	}
}
