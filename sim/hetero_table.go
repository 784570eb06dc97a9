package sim

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/lachesis-sched/lachesis/sim/trace"
)

// Consolidation is whether a multi-GPU job's GPUs lie on the fewest nodes
// that can hold them or are spread over more (Gavel's "placement").
type Consolidation int

const (
	// Consolidated: on the fewest nodes the job's GPUs can occupy,
	// ⌈GPUs / GPUs-per-node⌉ (one node for a job that fits one).
	Consolidated Consolidation = iota
	// Spread: on more nodes than that.
	Spread
)

func (c Consolidation) String() string {
	if c == Consolidated {
		return "consolidated"
	}
	return "spread"
}

// GavelModel is one (model, batch size) entry of the Gavel table.
type GavelModel struct {
	Model string
	Batch int
}

func (m GavelModel) String() string {
	if m.Batch == 0 {
		return m.Model
	}
	return fmt.Sprintf("%s/bs%d", m.Model, m.Batch)
}

type gavelKey struct {
	model GavelModel
	gpus  int
	typ   string
	cons  Consolidation
}

// GavelTable is Gavel's measured throughputs (steps/s) of each (model,
// batch) on each GPU type, alone, consolidated and spread, for 1, 2, 4 and
// 8 GPUs (data/gavel/throughputs.csv).
type GavelTable struct {
	// Types are the GPU types, sorted by name.
	Types []string
	// Models are the (model, batch) entries, sorted by model then batch.
	Models []GavelModel
	// GPUCounts are the GPU counts measured, ascending.
	GPUCounts []int
	thr       map[gavelKey]float64
}

// ReadGavelCSV reads Gavel's throughput table as flattened in
// data/gavel/throughputs.csv (gpu_type, placement, model,
// batch_size, num_gpus, throughput; placement "consolidated" or
// "unconsolidated").
func ReadGavelCSV(r io.Reader) (*GavelTable, error) {
	t := &GavelTable{thr: map[gavelKey]float64{}}
	types, models, counts := map[string]bool{}, map[GavelModel]bool{}, map[int]bool{}
	cols := []string{"gpu_type", "placement", "model", "batch_size", "num_gpus", "throughput"}
	err := trace.ReadCSV(r, cols, func(row *trace.Row) error {
		var p Consolidation
		switch pl := row.Field("placement"); pl {
		case "consolidated":
			p = Consolidated
		case "unconsolidated":
			p = Spread
		default:
			return fmt.Errorf("%w: line %d: placement %q is not consolidated or unconsolidated", ErrBadTrace, row.Line, pl)
		}
		m := GavelModel{Model: row.Field("model"), Batch: row.Int("batch_size")}
		k := gavelKey{model: m, gpus: row.Int("num_gpus"), typ: row.Field("gpu_type"), cons: p}
		v := row.Float("throughput")
		if row.Err != nil {
			return row.Err
		}
		if k.gpus <= 0 || !(v >= 0) || k.typ == "" || m.Model == "" {
			return fmt.Errorf("%w: line %d: bad throughput row", ErrBadTrace, row.Line)
		}
		t.thr[k] = v
		types[k.typ], models[m], counts[k.gpus] = true, true, true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(t.thr) == 0 {
		return nil, fmt.Errorf("%w: the throughput table is empty", ErrBadTrace)
	}
	for k := range types {
		t.Types = append(t.Types, k)
	}
	for m := range models {
		t.Models = append(t.Models, m)
	}
	for g := range counts {
		t.GPUCounts = append(t.GPUCounts, g)
	}
	slices.Sort(t.Types)
	slices.Sort(t.GPUCounts)
	slices.SortFunc(t.Models, func(a, b GavelModel) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Batch, b.Batch))
	})
	return t, nil
}

// Throughput is the measured steps/s, and whether the table has the row.
// A single-GPU job has no spread placement: its spread figure is its
// consolidated one.
func (t *GavelTable) Throughput(m GavelModel, typ string, p Consolidation, gpus int) (float64, bool) {
	if gpus == 1 {
		p = Consolidated
	}
	v, ok := t.thr[gavelKey{model: m, gpus: gpus, typ: typ, cons: p}]
	return v, ok
}

// TableGPUs is the measured GPU count whose figures stand for a job of
// gpus GPUs: the largest measured count not above it (3 → 2, 6 → 4, 16 →
// 8). Jobs larger than the largest measurement keep its speed ratios, the
// one assumption the table cannot check.
func (t *GavelTable) TableGPUs(gpus int) int {
	best := t.GPUCounts[0]
	for _, g := range t.GPUCounts {
		if g <= gpus {
			best = g
		}
	}
	return best
}

// Speed is a job's speed on typ with placement p relative to the
// reference type consolidated, at the job's table GPU count: the factor by
// which it runs faster than its trace duration says. 0 means it cannot run
// there: the table has 0 (Gavel's "did not run", e.g. out of memory) or no
// row (a spread placement never measured).
func (t *GavelTable) Speed(m GavelModel, gpus int, typ string, p Consolidation, ref string) float64 {
	g := t.TableGPUs(gpus)
	base, ok := t.Throughput(m, ref, Consolidated, g)
	if !ok || base <= 0 {
		return 0
	}
	v, ok := t.Throughput(m, typ, p, g)
	if !ok {
		return 0
	}
	return v / base
}

// GavelAssign is the model rule of heterogeneous runs. A job's candidates
// are the table's models (names, not batch sizes) that ran on the
// reference type, consolidated, at the job's table GPU count (TableGPUs);
// x = splitmix64(seed ⊕ job ID ⊕ 0x6761766c) ("gavl" in ASCII, so the draw is
// independent of the Synergy rule's), the model is candidate x mod M in
// name order, and its batch size is batch splitmix64(x) mod B of the B
// batch sizes of that model that qualify, ascending. Like ModelsAssign, a
// job's draw depends only on the seed and its own ID and GPU count.
func (t *GavelTable) GavelAssign(job *Job, ref string, seed uint64) (GavelModel, bool) {
	g := t.TableGPUs(job.GPUs)
	var names []string
	var batches []GavelModel
	for _, m := range t.Models {
		if v, ok := t.Throughput(m, ref, Consolidated, g); !ok || v <= 0 {
			continue
		}
		if len(names) == 0 || names[len(names)-1] != m.Model {
			names = append(names, m.Model)
		}
	}
	if len(names) == 0 {
		return GavelModel{}, false
	}
	x := splitmix64(seed ^ uint64(job.ID) ^ 0x6761766c)
	name := names[x%uint64(len(names))]
	for _, m := range t.Models {
		if m.Model != name {
			continue
		}
		if v, ok := t.Throughput(m, ref, Consolidated, g); ok && v > 0 {
			batches = append(batches, m)
		}
	}
	return batches[splitmix64(x)%uint64(len(batches))], true
}

// Named is the entry a job names (GavelModel.String, e.g. "LM/bs5" or
// "A3C"), if the table has it running on the reference type at the job's
// table GPU count: a trace or job list that says what its jobs train keeps
// that, like ModelsAssign.
func (t *GavelTable) Named(name string, gpus int, ref string) (GavelModel, bool) {
	if name == "" {
		return GavelModel{}, false
	}
	for _, m := range t.Models {
		if m.String() == name {
			v, ok := t.Throughput(m, ref, Consolidated, t.TableGPUs(gpus))
			return m, ok && v > 0
		}
	}
	return GavelModel{}, false
}
