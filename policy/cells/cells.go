// Package cells is HiveD's affinity cells the buddy way (issue 35, item
// 2): the cluster as a tree of cells (network switch → node → GPU groups
// → GPU), built from what Slurm knows (topology/tree's switches, each
// node's GPU count and the GPUs under one PCIe switch), and a multi-GPU
// job placed in the smallest wholly free cell that holds it, so that a
// larger cell is split only when nothing smaller fits. Quota cells are
// bound to their accounts here too (Bind), so an owner's big job finds
// its cell whole.
//
// Pure Go, no I/O: slurmctld's core, the simulator and tests call the same
// rules. The tree is small (a cell per GPU and per buddy level), so every
// call walks it; nothing here is on a per-job hot path of slurmctld.
package cells

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrBadTopology is wrapped by every error about a topology or a cell size.
var ErrBadTopology = errors.New("bad cell topology")

// Limits on what a topology may hold: more is a typo or hostile input.
const (
	MaxNodes       = 65536
	MaxGPUsPerNode = 64
	MaxSwitches    = 4096
)

// Topology is the cluster as Slurm knows it: leaf switches of
// topology/tree (or one switch of every node when there is none), each
// with its nodes.
type Topology struct {
	Switches []Switch
}

// Switch is one leaf network switch and the nodes under it.
type Switch struct {
	Name  string
	Nodes []Node
}

// Node is one node's GPU layout.
type Node struct {
	Name string
	GPUs int
	// GroupGPUs is how many GPUs share one PCIe switch (0: the node's GPUs
	// split in buddy halves when their count is a power of two).
	GroupGPUs int
}

// Uniform is a topology of nodes×gpus, switchNodes nodes per switch
// (0: one switch of them all), for the simulator and tests.
func Uniform(nodes, gpus, switchNodes int) Topology {
	if switchNodes <= 0 || switchNodes > nodes {
		switchNodes = nodes
	}
	var t Topology
	for n := 0; n < nodes; n++ {
		if n%switchNodes == 0 {
			t.Switches = append(t.Switches, Switch{Name: fmt.Sprintf("s%d", n/switchNodes)})
		}
		sw := &t.Switches[len(t.Switches)-1]
		sw.Nodes = append(sw.Nodes, Node{Name: fmt.Sprintf("n%d", n), GPUs: gpus})
	}
	return t
}

// Level says what a cell is.
type Level uint8

const (
	LevelGPU Level = iota
	LevelGroup
	LevelNode
	LevelSwitch
)

// Cell is one node of the tree.
type Cell struct {
	Level    Level
	GPUs     int
	Parent   int // -1 for a switch
	Children []int
	Node     int // node index; -1 for a switch
	Switch   int
	first    int // first leaf (GPU) index under it; leaves are contiguous
}

// Tree is the cells and which GPUs are free. Not safe for concurrent use.
type Tree struct {
	cells    []Cell
	free     []int    // free GPUs under each cell
	leafCell []int    // GPU index → its cell
	used     []bool   // GPU index → taken
	nodes    []int    // node index → its cell
	switches []int    // switch index → its cell
	swNames  []string // switch index → its name (errors name switches)
	owner    []int    // cell → the owner every GPU under it is bound to, -1 none, -2 mixed
	gpuOwner []int    // GPU index → owner, -1 none
	maxNode  int

	names []string // node index → its name (Node.Name)
}

// New builds the tree of a topology, checking its bounds.
func New(t Topology) (*Tree, error) {
	if len(t.Switches) == 0 || len(t.Switches) > MaxSwitches {
		return nil, fmt.Errorf("%w: %d switches (1 to %d)", ErrBadTopology, len(t.Switches), MaxSwitches)
	}
	tr := &Tree{}
	nodes := 0
	for si, sw := range t.Switches {
		nodes += len(sw.Nodes)
		if len(sw.Nodes) == 0 || nodes > MaxNodes {
			return nil, fmt.Errorf("%w: switch %q has %d nodes (the cluster at most %d)", ErrBadTopology, sw.Name, len(sw.Nodes), MaxNodes)
		}
		sc := tr.add(Cell{Level: LevelSwitch, Parent: -1, Node: -1, Switch: si})
		tr.switches = append(tr.switches, sc)
		tr.swNames = append(tr.swNames, sw.Name)
		for _, n := range sw.Nodes {
			if n.GPUs < 1 || n.GPUs > MaxGPUsPerNode {
				return nil, fmt.Errorf("%w: node %q has %d GPUs (1 to %d)", ErrBadTopology, n.Name, n.GPUs, MaxGPUsPerNode)
			}
			if n.GroupGPUs < 0 || n.GroupGPUs > n.GPUs || (n.GroupGPUs > 0 && n.GPUs%n.GroupGPUs != 0) {
				return nil, fmt.Errorf("%w: node %q: %d GPUs per PCIe group does not divide its %d GPUs", ErrBadTopology, n.Name, n.GroupGPUs, n.GPUs)
			}
			ni := len(tr.nodes)
			nc := tr.add(Cell{Level: LevelNode, Parent: sc, Node: ni, Switch: si, first: len(tr.leafCell)})
			tr.nodes = append(tr.nodes, nc)
			tr.names = append(tr.names, n.Name)
			tr.cells[sc].Children = append(tr.cells[sc].Children, nc)
			group := n.GroupGPUs
			if group == 0 || group == n.GPUs {
				tr.split(nc, n.GPUs, ni, si)
			} else {
				for g := 0; g < n.GPUs/group; g++ {
					gc := tr.add(Cell{Level: LevelGroup, Parent: nc, Node: ni, Switch: si, first: len(tr.leafCell)})
					tr.cells[nc].Children = append(tr.cells[nc].Children, gc)
					tr.split(gc, group, ni, si)
				}
			}
			tr.maxNode = max(tr.maxNode, n.GPUs)
		}
	}
	// Sizes and free counts, children before parents (they come later).
	for c := len(tr.cells) - 1; c >= 0; c-- {
		if tr.cells[c].Level == LevelGPU {
			tr.cells[c].GPUs = 1
		}
		if p := tr.cells[c].Parent; p >= 0 {
			tr.cells[p].GPUs += tr.cells[c].GPUs
		}
	}
	tr.free = make([]int, len(tr.cells))
	tr.owner = make([]int, len(tr.cells))
	for c := range tr.cells {
		tr.free[c] = tr.cells[c].GPUs
		tr.owner[c] = -1
	}
	tr.used = make([]bool, len(tr.leafCell))
	tr.gpuOwner = make([]int, len(tr.leafCell))
	for g := range tr.gpuOwner {
		tr.gpuOwner[g] = -1
	}
	return tr, nil
}

func (t *Tree) add(c Cell) int {
	t.cells = append(t.cells, c)
	return len(t.cells) - 1
}

// split makes the cells under c (gpus GPUs): buddy halves while the count
// is even and above 2, else one GPU cell per GPU.
func (t *Tree) split(c, gpus, node, sw int) {
	if gpus%2 == 0 && gpus > 2 {
		for h := 0; h < 2; h++ {
			hc := t.add(Cell{Level: LevelGroup, Parent: c, Node: node, Switch: sw, first: len(t.leafCell)})
			t.cells[c].Children = append(t.cells[c].Children, hc)
			t.split(hc, gpus/2, node, sw)
		}
		return
	}
	for g := 0; g < gpus; g++ {
		lc := t.add(Cell{Level: LevelGPU, Parent: c, Node: node, Switch: sw, first: len(t.leafCell)})
		t.cells[c].Children = append(t.cells[c].Children, lc)
		t.leafCell = append(t.leafCell, lc)
	}
}

// Cell returns cell c; Cells is how many there are (ids 0 to Cells-1).
func (t *Tree) Cell(c int) Cell { return t.cells[c] }
func (t *Tree) Cells() int      { return len(t.cells) }

// First is the first GPU index under the cell; its GPUs are First to
// First+GPUs-1.
func (c Cell) First() int { return c.first }

// GPUs is the cluster's GPU count; Free its free GPUs.
func (t *Tree) GPUs() int { return len(t.leafCell) }
func (t *Tree) Free() int {
	f := 0
	for _, s := range t.switches {
		f += t.free[s]
	}
	return f
}

// Nodes is how many nodes the tree has; NodeGPUs the most GPUs one has.
func (t *Tree) Nodes() int    { return len(t.nodes) }
func (t *Tree) NodeGPUs() int { return t.maxNode }

// NodeCell is node n's cell.
func (t *Tree) NodeCell(n int) int { return t.nodes[n] }

// NodeFree is node n's free GPUs.
func (t *Tree) NodeFree(n int) int { return t.free[t.nodes[n]] }

// NodeName is node n's name, as its topology gave it.
func (t *Tree) NodeName(n int) string { return t.names[n] }

// NodeOwners lists the owners any of node n's GPUs are bound to (Bind),
// each once, smallest first; nil when none is.
func (t *Tree) NodeOwners(n int) []int {
	var out []int
	for _, g := range t.GPUsOf(t.nodes[n]) {
		if o := t.gpuOwner[g]; o >= 0 && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// NodeOf is the node of GPU g.
func (t *Tree) NodeOf(g int) int { return t.cells[t.leafCell[g]].Node }

// CellFree is cell c's free GPUs.
func (t *Tree) CellFree(c int) int { return t.free[c] }

// GPUsOf lists the GPU indexes under cell c.
func (t *Tree) GPUsOf(c int) []int {
	out := make([]int, t.cells[c].GPUs)
	for i := range out {
		out[i] = t.cells[c].first + i
	}
	return out
}

// Sizes lists the cell sizes within a node, smallest first: the sizes a
// quota's cells may have besides whole nodes under one switch.
func (t *Tree) Sizes() []int {
	var s []int
	for _, c := range t.cells {
		if c.Level != LevelSwitch && !slices.Contains(s, c.GPUs) {
			s = append(s, c.GPUs)
		}
	}
	slices.Sort(s)
	return s
}

// Filter says whether a job may take GPUs in a cell (for example only in
// its account's quota cells); nil allows every cell.
type Filter func(t *Tree, c int) bool

// Placement is where a job runs.
type Placement struct {
	GPUs []int
	// Cell is the smallest cell that holds the job, -1 when it spans
	// switches or is scattered in a node beyond one free cell.
	Cell int
	// Scattered: no wholly free cell held it; it took free GPUs of one
	// node (or whole nodes of several switches) instead.
	Scattered bool
}

// Alloc places a job of n GPUs: the smallest wholly free cell that holds
// it (ties: the cell whose parent has the fewest free GPUs, keeping whole
// cells whole; then the lowest index); a job larger than a node takes
// whole free nodes under the one switch with the fewest that suffice.
// With scatter, a job no free cell holds takes the free GPUs of the
// fullest node that has enough (or, above a node, whole nodes of several
// switches). ok false: nothing fits now.
func (t *Tree) Alloc(n int, filter Filter, scatter bool) (Placement, bool) {
	if n <= 0 || n > len(t.leafCell) {
		return Placement{}, false
	}
	if n > t.maxNode {
		return t.allocNodes(n, filter, scatter)
	}
	best := -1
	for c := range t.cells {
		cl := &t.cells[c]
		if cl.Level == LevelSwitch || cl.GPUs < n || t.free[c] != cl.GPUs {
			continue
		}
		if filter != nil && !filter(t, c) {
			continue
		}
		if best < 0 || t.better(c, best) {
			best = c
		}
	}
	if best >= 0 {
		p := Placement{Cell: best, GPUs: t.GPUsOf(best)[:n]}
		t.take(p.GPUs)
		return p, true
	}
	if !scatter {
		return Placement{}, false
	}
	// Scattered: the fullest node with n free GPUs it may use.
	return t.AllocBestFit(n, filter)
}

// AllocBestFit places a job without cells, as Slurm's node selection
// does: a job within a node on the fullest node with n free GPUs (best
// fit), a larger one on whole free nodes (one switch if one has enough).
func (t *Tree) AllocBestFit(n int, filter Filter) (Placement, bool) {
	if n <= 0 || n > len(t.leafCell) {
		return Placement{}, false
	}
	if n > t.maxNode {
		return t.allocNodes(n, filter, true)
	}
	bestNode, bestFree := -1, 0
	for ni, nc := range t.nodes {
		f := t.usableIn(nc, filter)
		if f >= n && (bestNode < 0 || f < bestFree) {
			bestNode, bestFree = ni, f
		}
	}
	if bestNode < 0 {
		return Placement{}, false
	}
	p := Placement{Cell: -1, Scattered: true, GPUs: t.freeGPUsIn(t.nodes[bestNode], filter, n)}
	t.take(p.GPUs)
	return p, true
}

// better: cell a is a better home than b (same job).
func (t *Tree) better(a, b int) bool {
	ca, cb := &t.cells[a], &t.cells[b]
	if ca.GPUs != cb.GPUs {
		return ca.GPUs < cb.GPUs
	}
	pa, pb := t.parentFree(a), t.parentFree(b)
	if pa != pb {
		return pa < pb
	}
	return a < b
}

func (t *Tree) parentFree(c int) int {
	if p := t.cells[c].Parent; p >= 0 {
		return t.free[p]
	}
	return 0
}

// usableIn counts the free GPUs under c whose own cell the filter allows.
func (t *Tree) usableIn(c int, filter Filter) int {
	if filter == nil {
		return t.free[c]
	}
	n := 0
	for _, g := range t.GPUsOf(c) {
		if !t.used[g] && filter(t, t.leafCell[g]) {
			n++
		}
	}
	return n
}

func (t *Tree) freeGPUsIn(c int, filter Filter, n int) []int {
	var out []int
	for _, g := range t.GPUsOf(c) {
		if len(out) == n {
			break
		}
		if !t.used[g] && (filter == nil || filter(t, t.leafCell[g])) {
			out = append(out, g)
		}
	}
	return out
}

// allocNodes places a job larger than a node on ⌈n/G⌉ whole free nodes.
func (t *Tree) allocNodes(n int, filter Filter, scatter bool) (Placement, bool) {
	wholeIn := func(s int) []int {
		var out []int
		for _, nc := range t.cells[t.switches[s]].Children {
			if t.free[nc] == t.cells[nc].GPUs && (filter == nil || filter(t, nc)) {
				out = append(out, nc)
			}
		}
		return out
	}
	need := func(nodes []int) int { // how many of these nodes hold n GPUs
		got := 0
		for i, nc := range nodes {
			got += t.cells[nc].GPUs
			if got >= n {
				return i + 1
			}
		}
		return -1
	}
	bestSw, bestCount := -1, 0
	for s := range t.switches {
		w := wholeIn(s)
		if need(w) < 0 {
			continue
		}
		if bestSw < 0 || len(w) < bestCount {
			bestSw, bestCount = s, len(w)
		}
	}
	var nodes []int
	cell := -1
	if bestSw >= 0 {
		w := wholeIn(bestSw)
		nodes = w[:need(w)]
		cell = t.switches[bestSw]
		if len(nodes) < len(t.cells[cell].Children) {
			cell = -1 // several nodes of a switch: no one cell is exactly theirs
		}
	} else {
		if !scatter {
			return Placement{}, false
		}
		var all []int
		for s := range t.switches {
			all = append(all, wholeIn(s)...)
		}
		k := need(all)
		if k < 0 {
			return Placement{}, false
		}
		nodes = all[:k]
	}
	p := Placement{Cell: cell, Scattered: bestSw < 0}
	left := n
	for _, nc := range nodes {
		take := min(left, t.cells[nc].GPUs)
		p.GPUs = append(p.GPUs, t.GPUsOf(nc)[:take]...)
		left -= take
	}
	t.take(p.GPUs)
	return p, true
}

func (t *Tree) take(gpus []int) {
	for _, g := range gpus {
		if t.used[g] {
			panic(fmt.Sprintf("cells: GPU %d taken twice", g))
		}
		t.used[g] = true
		for c := t.leafCell[g]; c >= 0; c = t.cells[c].Parent {
			t.free[c]--
		}
	}
}

// Release frees a placement's GPUs.
func (t *Tree) Release(gpus []int) {
	for _, g := range gpus {
		if !t.used[g] {
			panic(fmt.Sprintf("cells: GPU %d freed twice", g))
		}
		t.used[g] = false
		for c := t.leafCell[g]; c >= 0; c = t.cells[c].Parent {
			t.free[c]++
		}
	}
}

// Stranded measures fragmentation: the free GPUs that cannot serve a
// waiting job of minJob GPUs however jobs are placed, because they lie
// on nodes with fewer than minJob free (for a job above a node: on nodes
// that are not wholly free). 0 when minJob ≤ 0 (nothing waits).
func (t *Tree) Stranded(minJob int) int {
	if minJob <= 0 {
		return 0
	}
	s := 0
	for _, nc := range t.nodes {
		s += StrandedOn(t.free[nc], t.cells[nc].GPUs, minJob)
	}
	return s
}

// StrandedOn is the rule of Stranded for one node of size GPUs with free
// of them free: its free GPUs when a waiting job of minJob GPUs cannot
// use them (fewer free than the job needs; for a job above a node, the
// node not wholly free), else 0. For callers that know each node's free
// GPUs but keep no tree (slurmctld's core).
func StrandedOn(free, size, minJob int) int {
	if minJob <= 0 {
		return 0
	}
	if (minJob <= size && free < minJob) || (minJob > size && free < size) {
		return free
	}
	return 0
}

// Owner is the owner every GPU under cell c is bound to (Bind), -1 when
// none is, -2 when they differ.
func (t *Tree) Owner(c int) int { return t.owner[c] }

// OwnerOfGPU is the owner GPU g is bound to, -1 none.
func (t *Tree) OwnerOfGPU(g int) int { return t.gpuOwner[g] }

// Bind binds a cell of size GPUs to owner (≥ 0) for good: a quota cell. A
// size within a node must be a cell size of the tree (Sizes); a larger one
// a whole number of nodes under one switch. The cell is chosen the buddy
// way among cells bound to no one: the one whose parent has the fewest
// unbound GPUs, so quota cells pack and leave larger cells whole. It
// returns the cells bound (one, or the nodes of a multi-node cell).
func (t *Tree) Bind(owner, size int) ([]int, error) {
	if owner < 0 {
		return nil, fmt.Errorf("%w: owner %d", ErrBadTopology, owner)
	}
	if size <= t.maxNode {
		if !slices.Contains(t.Sizes(), size) {
			return nil, fmt.Errorf("%w: no cell of %d GPUs (cells here hold %v GPUs, or whole nodes of %d)", ErrBadTopology, size, t.Sizes(), t.maxNode)
		}
		best, bestUnbound := -1, 0
		for c := range t.cells {
			if t.cells[c].Level == LevelSwitch || t.cells[c].GPUs != size || t.owner[c] != -1 {
				continue
			}
			u := 0
			if p := t.cells[c].Parent; p >= 0 {
				u = t.unbound(p)
			}
			if best < 0 || u < bestUnbound {
				best, bestUnbound = c, u
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%w: no unbound cell of %d GPUs is left", ErrBadTopology, size)
		}
		t.setOwner(best, owner)
		return []int{best}, nil
	}
	if size%t.maxNode != 0 {
		return nil, fmt.Errorf("%w: a cell of %d GPUs is larger than a node (%d GPUs) but not a whole number of nodes", ErrBadTopology, size, t.maxNode)
	}
	return t.BindNodes(owner, size/t.maxNode, t.maxNode)
}

// BindNodes binds count whole nodes of gpus GPUs each under one leaf
// switch to owner (≥ 0) for good: a quota cell of several nodes (HiveD's
// rack cell; Slurm's topology/tree places a job of several nodes under
// one switch where it can). Of the switches that have enough unbound such
// nodes, the one with the fewest is chosen, so larger groups stay whole.
// It returns the node cells bound; the error names how many unbound nodes
// of that size each switch has.
func (t *Tree) BindNodes(owner, count, gpus int) ([]int, error) {
	if owner < 0 || count < 1 || gpus < 1 {
		return nil, fmt.Errorf("%w: owner %d, %d nodes of %d GPUs", ErrBadTopology, owner, count, gpus)
	}
	free := func(s int) int {
		n := 0
		for _, nc := range t.cells[t.switches[s]].Children {
			if t.owner[nc] == -1 && t.cells[nc].GPUs == gpus {
				n++
			}
		}
		return n
	}
	bestSw, bestCount := -1, 0
	for s := range t.switches {
		if n := free(s); n >= count && (bestSw < 0 || n < bestCount) {
			bestSw, bestCount = s, n
		}
	}
	if bestSw < 0 {
		return nil, fmt.Errorf("%w: no leaf switch has %d unbound nodes of %d GPUs (unbound nodes of %d GPUs per switch: %s)",
			ErrBadTopology, count, gpus, gpus, t.switchCounts(free))
	}
	var out []int
	for _, nc := range t.cells[t.switches[bestSw]].Children {
		if len(out) < count && t.owner[nc] == -1 && t.cells[nc].GPUs == gpus {
			t.setOwner(nc, owner)
			out = append(out, nc)
		}
	}
	return out, nil
}

// SwitchName is switch s's name (Cell.Switch).
func (t *Tree) SwitchName(s int) string { return t.swNames[s] }

// switchCounts writes count(s) for each switch, at most 8 named.
func (t *Tree) switchCounts(count func(s int) int) string {
	var b strings.Builder
	for s := range t.switches {
		if s == 8 {
			fmt.Fprintf(&b, " and %d more", len(t.switches)-s)
			break
		}
		if s > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", t.swNames[s], count(s))
	}
	return b.String()
}

// unbound counts the GPUs under c bound to no one.
func (t *Tree) unbound(c int) int {
	n := 0
	for _, g := range t.GPUsOf(c) {
		if t.gpuOwner[g] == -1 {
			n++
		}
	}
	return n
}

// setOwner binds every GPU under c and recomputes the owners of c's
// subtree and ancestors.
func (t *Tree) setOwner(c, owner int) {
	for _, g := range t.GPUsOf(c) {
		t.gpuOwner[g] = owner
	}
	var down func(int)
	down = func(x int) {
		t.owner[x] = owner
		for _, ch := range t.cells[x].Children {
			down(ch)
		}
	}
	down(c)
	for p := t.cells[c].Parent; p >= 0; p = t.cells[p].Parent {
		o := t.owner[t.cells[p].Children[0]]
		for _, ch := range t.cells[p].Children[1:] {
			if t.owner[ch] != o {
				o = -2
				break
			}
		}
		t.owner[p] = o
	}
}
