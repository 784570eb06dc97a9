package cells

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func mustTree(t *testing.T, top Topology) *Tree {
	t.Helper()
	tr, err := New(top)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestTreeShape(t *testing.T) {
	tr := mustTree(t, Uniform(4, 8, 2))
	if tr.GPUs() != 32 || tr.Free() != 32 || tr.Nodes() != 4 || tr.NodeGPUs() != 8 {
		t.Fatalf("got %d GPUs, %d free, %d nodes of %d", tr.GPUs(), tr.Free(), tr.Nodes(), tr.NodeGPUs())
	}
	if got := tr.Sizes(); !slices.Equal(got, []int{1, 2, 4, 8}) {
		t.Fatalf("sizes %v, want buddy halves 1 2 4 8", got)
	}
	grouped := mustTree(t, Topology{Switches: []Switch{{Name: "s", Nodes: []Node{{Name: "a", GPUs: 6, GroupGPUs: 3}}}}})
	if got := grouped.Sizes(); !slices.Equal(got, []int{1, 3, 6}) {
		t.Fatalf("6 GPUs in PCIe groups of 3: sizes %v, want 1 3 6", got)
	}
}

func TestNewRejects(t *testing.T) {
	for name, top := range map[string]Topology{
		"no switches":        {},
		"empty switch":       {Switches: []Switch{{Name: "s"}}},
		"node without GPUs":  {Switches: []Switch{{Name: "s", Nodes: []Node{{Name: "a"}}}}},
		"too many GPUs":      {Switches: []Switch{{Name: "s", Nodes: []Node{{Name: "a", GPUs: MaxGPUsPerNode + 1}}}}},
		"group not dividing": {Switches: []Switch{{Name: "s", Nodes: []Node{{Name: "a", GPUs: 8, GroupGPUs: 3}}}}},
	} {
		if _, err := New(top); !errors.Is(err, ErrBadTopology) {
			t.Errorf("%s: got %v, want ErrBadTopology", name, err)
		}
	}
}

func TestAllocSmallestFreeCellKeepsBuddiesWhole(t *testing.T) {
	tr := mustTree(t, Uniform(2, 8, 0))
	one, ok := tr.Alloc(1, nil, false)
	if !ok || tr.NodeOf(one.GPUs[0]) != 0 {
		t.Fatalf("1 GPU: %+v %v", one, ok)
	}
	// The second 1-GPU job takes the first one's buddy, not a GPU of a
	// whole pair elsewhere.
	two, _ := tr.Alloc(1, nil, false)
	if tr.Cell(tr.leafCell[two.GPUs[0]]).Parent != tr.Cell(tr.leafCell[one.GPUs[0]]).Parent {
		t.Fatalf("second GPU %v is not the buddy of %v", two.GPUs, one.GPUs)
	}
	// A 4-GPU job finds node 0's untouched half whole.
	four, ok := tr.Alloc(4, nil, false)
	if !ok || four.Cell < 0 || tr.Cell(four.Cell).GPUs != 4 || tr.NodeOf(four.GPUs[0]) != 0 {
		t.Fatalf("4 GPUs: %+v", four)
	}
	// Node 1 is still one whole cell of 8.
	if tr.NodeFree(1) != 8 {
		t.Fatalf("node 1 has %d free, want 8 (left whole)", tr.NodeFree(1))
	}
	eight, ok := tr.Alloc(8, nil, false)
	if !ok || tr.NodeOf(eight.GPUs[0]) != 1 {
		t.Fatalf("8 GPUs: %+v", eight)
	}
	tr.Release(eight.GPUs)
	tr.Release(four.GPUs)
	tr.Release(two.GPUs)
	tr.Release(one.GPUs)
	if tr.Free() != 16 {
		t.Fatalf("free %d after releasing everything", tr.Free())
	}
}

func TestAllocWaitsRatherThanScatterUnlessAsked(t *testing.T) {
	tr := mustTree(t, Uniform(1, 4, 0))
	a, _ := tr.Alloc(1, nil, false) // GPU 0
	b, _ := tr.Alloc(2, nil, false) // GPUs 2,3: the other pair
	tr.Release(a.GPUs)
	tr.Alloc(1, nil, false) // GPU 0 again
	_ = b
	// Free: GPU 1 only; then free pair of b: GPUs 1,2,3 free but no
	// whole cell of 2 except 2-3.
	tr.Release(b.GPUs)
	three, ok := tr.Alloc(3, nil, false)
	if ok {
		t.Fatalf("3 GPUs in no whole cell of 4 placed: %+v", three)
	}
	three, ok = tr.Alloc(3, nil, true)
	if !ok || !three.Scattered || len(three.GPUs) != 3 {
		t.Fatalf("scattered 3 GPUs: %+v %v", three, ok)
	}
}

func TestAllocMultiNodeBestFitSwitch(t *testing.T) {
	// Two switches of 3 and 2 nodes: a 16-GPU job goes to the switch with
	// the fewest whole nodes that suffice.
	tr := mustTree(t, Topology{Switches: []Switch{
		{Name: "big", Nodes: []Node{{Name: "a", GPUs: 8}, {Name: "b", GPUs: 8}, {Name: "c", GPUs: 8}}},
		{Name: "small", Nodes: []Node{{Name: "d", GPUs: 8}, {Name: "e", GPUs: 8}}},
	}})
	p, ok := tr.Alloc(16, nil, false)
	if !ok || tr.NodeOf(p.GPUs[0]) != 3 || tr.NodeOf(p.GPUs[15]) != 4 || p.Cell < 0 {
		t.Fatalf("16 GPUs: %+v", p)
	}
	// 24 GPUs: only 3 whole nodes are in "big".
	q, ok := tr.Alloc(24, nil, false)
	if !ok || len(q.GPUs) != 24 {
		t.Fatalf("24 GPUs: %+v", q)
	}
	if _, ok := tr.Alloc(8, nil, true); ok {
		t.Fatal("placed a job on a full cluster")
	}
}

func TestBindPacksQuotaCellsAndFilters(t *testing.T) {
	tr := mustTree(t, Uniform(2, 8, 0))
	a, err := tr.Bind(0, 4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Bind(1, 4)
	if err != nil {
		t.Fatal(err)
	}
	// Both 4-GPU cells in one node: the other node stays an unbound 8.
	if tr.Cell(a[0]).Node != tr.Cell(b[0]).Node {
		t.Fatalf("quota cells on nodes %d and %d, want packed", tr.Cell(a[0]).Node, tr.Cell(b[0]).Node)
	}
	if _, err := tr.Bind(2, 16); !errors.Is(err, ErrBadTopology) {
		t.Fatalf("a 2-node cell with one unbound node: %v", err)
	}
	if _, err := tr.Bind(2, 3); !errors.Is(err, ErrBadTopology) {
		t.Fatalf("a cell of 3 on buddy nodes: %v", err)
	}
	owner0 := func(t *Tree, c int) bool { return t.Owner(c) == 0 }
	p, ok := tr.Alloc(2, owner0, false)
	if !ok || tr.OwnerOfGPU(p.GPUs[0]) != 0 || tr.OwnerOfGPU(p.GPUs[1]) != 0 {
		t.Fatalf("owner 0's job left its cells: %+v", p)
	}
	if _, ok := tr.Alloc(4, owner0, false); ok {
		t.Fatal("owner 0's 4-GPU job fit in 2 free GPUs of its cell")
	}
}

func TestStranded(t *testing.T) {
	tr := mustTree(t, Uniform(2, 4, 0))
	tr.Alloc(3, nil, false) // node 0: 1 free
	tr.Alloc(2, nil, false) // node 1: 2 free
	for _, c := range []struct{ min, want int }{{0, 0}, {1, 0}, {2, 1}, {3, 3}, {8, 3}} {
		if got := tr.Stranded(c.min); got != c.want {
			t.Errorf("Stranded(%d) = %d, want %d", c.min, got, c.want)
		}
	}
}

// A node's name is its topology's, and its owners are the accounts any of
// its GPUs are bound to: a whole node, half a node, or none.
func TestNodeOwnersAndNames(t *testing.T) {
	tr := mustTree(t, Uniform(3, 4, 0))
	if _, err := tr.Bind(0, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Bind(1, 2); err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0}, {1}, nil}
	for n := range 3 {
		if got := tr.NodeOwners(n); !slices.Equal(got, want[n]) {
			t.Errorf("node %d's owners %v, want %v", n, got, want[n])
		}
		if got := tr.NodeName(n); got != fmt.Sprintf("n%d", n) {
			t.Errorf("node %d's name %q", n, got)
		}
	}
}

// StrandedOn is Stranded's rule for one node.
func TestStrandedOnCountsFreeGPUsTooFewForTheJob(t *testing.T) {
	for _, c := range []struct{ free, size, min, want int }{
		{3, 4, 0, 0}, // nothing waits
		{3, 4, 2, 0}, // holds the job
		{1, 4, 2, 1}, // too few
		{3, 4, 8, 3}, // a job above a node needs it whole
		{4, 4, 8, 0},
	} {
		if got := StrandedOn(c.free, c.size, c.min); got != c.want {
			t.Errorf("StrandedOn(%d, %d, %d) = %d, want %d", c.free, c.size, c.min, got, c.want)
		}
	}
}
