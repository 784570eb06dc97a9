package quotasim

import (
	"slices"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/quota"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

func tr(jobs ...trace.Job) *trace.Trace {
	t := &trace.Trace{Name: "t", Jobs: jobs}
	for i := range t.Jobs {
		t.Jobs[i].ID = uint32(i + 1)
	}
	return t
}

func byID(res Result) map[uint32]JobResult {
	m := map[uint32]JobResult{}
	for _, j := range res.Jobs {
		m[j.ID] = j
	}
	return m
}

// An owner's job reclaims its cell from a borrower at once, and only the
// borrower in its cell is evicted (the cheaper one elsewhere is not).
func TestOwnerReclaimsItsCellFromBorrowers(t *testing.T) {
	cfg := DefaultConfig(cells.Uniform(2, 4, 0))
	cfg.Quotas = map[string]quota.Spec{"own": {Cells: 1, CellGPUs: 4}}
	cfg.CheckpointEvery = 0
	trc := tr(
		trace.Job{Submit: 0, GPUs: 4, Duration: 10000, Cluster: "borrow"},
		trace.Job{Submit: 0, GPUs: 4, Duration: 10000, Cluster: "borrow"},
		trace.Job{Submit: 600, GPUs: 4, Duration: 100, Cluster: "own"},
	)
	for _, p := range []Policy{QuotaCells, QuotaCount} {
		cfg.Policy = p
		res, err := Run(trc, cfg)
		if err != nil {
			t.Fatal(err)
		}
		jobs := byID(res)
		if q := jobs[3].Queueing(); q > cfg.PassInterval {
			t.Errorf("%s: the owner's job waited %v s", p, q)
		}
		if res.Evictions != 1 || jobs[1].Evicted+jobs[2].Evicted != 1 {
			t.Errorf("%s: %d evictions (%d, %d), want exactly one borrower", p, res.Evictions, jobs[1].Evicted, jobs[2].Evicted)
		}
		if res.WorkLostGPUSec != 4*600 {
			t.Errorf("%s: work lost %v GPU-s, want 2400 (4 GPUs × 600 s, no checkpoints)", p, res.WorkLostGPUSec)
		}
	}
	// Without quotas the owner waits for a borrower to end.
	cfg.Policy = Defaults
	res, _ := Run(trc, cfg)
	if q := byID(res)[3].Queueing(); q < 9000 || res.Evictions != 0 {
		t.Errorf("defaults: the owner waited %v s, %d evictions; want a wait for the borrowers", q, res.Evictions)
	}
}

// The bound holds per pass: a cell of 8 held by 8 one-GPU borrowers is
// freed over two passes of 4, never more in one.
func TestReclaimBoundPerPass(t *testing.T) {
	cfg := DefaultConfig(cells.Uniform(1, 8, 0))
	cfg.Quotas = map[string]quota.Spec{"own": {Cells: 1, CellGPUs: 8}}
	jobs := append(slices.Repeat([]trace.Job{{Submit: 0, GPUs: 1, Duration: 100000, Cluster: "b"}}, 8),
		trace.Job{Submit: 300, GPUs: 8, Duration: 100, Cluster: "own"})
	res, err := Run(tr(jobs...), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.MaxPerPass != 4 || res.Evictions != 8 {
		t.Fatalf("most in a pass %d, evictions %d; want 4 and 8", res.MaxPerPass, res.Evictions)
	}
	if q := byID(res)[9].Queueing(); q > 3*cfg.PassInterval {
		t.Fatalf("the owner waited %v s, want two passes", q)
	}
}

// With cells, borrowers go to unbound cells first, so the owner's 4-GPU
// job finds its cell whole: no eviction, no wait.
func TestCellsKeepTheQuotaWhole(t *testing.T) {
	cfg := DefaultConfig(cells.Uniform(2, 4, 0))
	cfg.Quotas = map[string]quota.Spec{"own": {Cells: 1, CellGPUs: 4}}
	jobs := append(slices.Repeat([]trace.Job{{Submit: 0, GPUs: 1, Duration: 50000, Cluster: "b"}}, 4),
		trace.Job{Submit: 120, GPUs: 4, Duration: 100, Cluster: "own"})
	cfg.Policy = QuotaCells
	res, err := Run(tr(jobs...), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Evictions != 0 || byID(res)[5].Queueing() > cfg.PassInterval {
		t.Fatalf("cells: %d evictions, owner waited %v s; want its whole cell at once", res.Evictions, byID(res)[5].Queueing())
	}
}

func TestPrivateTopology(t *testing.T) {
	for _, c := range []struct {
		spec       quota.Spec
		nodes, gpu int
	}{{quota.Spec{Cells: 3, CellGPUs: 8}, 3, 8}, {quota.Spec{Cells: 2, CellGPUs: 4}, 2, 4}, {quota.Spec{Cells: 1, CellGPUs: 16}, 2, 8},
		{quota.Spec{Cells: 2, CellGPUs: 8, Nodes: true}, 2, 8}} {
		tree, err := cells.New(PrivateTopology(c.spec, 8))
		if err != nil || tree.Nodes() != c.nodes || tree.NodeGPUs() != c.gpu {
			t.Errorf("%v: %d nodes of %d (%v)", c.spec, tree.Nodes(), tree.NodeGPUs(), err)
			continue
		}
		// The private cluster holds exactly its quota.
		if _, err := quota.Bind(tree, map[string]quota.Spec{"a": c.spec}); err != nil {
			t.Errorf("%v on its private cluster: %v", c.spec, err)
		}
	}
}

// HiveD's measure: an account that floods the cluster leaves another
// worse off than alone under today's order, and not with quotas in cells.
func TestCompareCountsAccountsWorseOffThanAlone(t *testing.T) {
	cfg := DefaultConfig(cells.Uniform(2, 4, 0))
	cfg.Quotas = map[string]quota.Spec{"flood": {Cells: 1, CellGPUs: 4}, "quiet": {Cells: 1, CellGPUs: 4}}
	jobs := append(slices.Repeat([]trace.Job{{Submit: 0, GPUs: 4, Duration: 3600, Cluster: "flood"}}, 6),
		trace.Job{Submit: 60, GPUs: 4, Duration: 600, Cluster: "quiet"})
	rep, err := Compare(tr(jobs...), cfg, []Policy{Defaults, QuotaCells}, 2)
	if err != nil {
		t.Fatal(err)
	}
	worse := map[Policy]int{}
	for _, p := range rep.Policies {
		worse[p.Policy] = p.WorseQueue
	}
	if worse[Defaults] != 1 || worse[QuotaCells] != 0 {
		t.Fatalf("accounts worse off than alone: %v; want 1 under defaults (quiet waits behind the flood), 0 with quotas in cells", worse)
	}
}
