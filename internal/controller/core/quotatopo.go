package core

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/internal/util/safego"
	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// The switches the quotas' cells lie under (issue 35). With
// TopologyPlugin=topology/tree slurmctld places a job of several nodes
// under one leaf switch where it can, so a quota of several nodes ("2
// nodes of 4 GPUs") is bound to nodes under one leaf switch, and an
// owner's job of several nodes reclaims nodes there. The core reads the
// leaves slurmctld has with `scontrol show topology` (internal/slurmcmd;
// topology/block's blocks, Slurm 23.11+, are read as leaves too) from a
// goroutine of its own, never under slurmctld's locks: at the first node
// table, a changed one and every reconfigure, while quotas are on. The
// plugin's node table is bound at once to the switches known then (none
// at the start: the nodes as one switch, as before); when a read brings
// switches, the quotas are bound again to them. A quota that fits the
// nodes but not one switch is an error naming quota.accounts.ACCOUNT and
// each switch's unbound nodes; after the start it is logged and the
// quotas keep the binding they had, as for a node table that no longer
// fits (cluster.go). Without topology/tree or topology/block the nodes
// stay one switch, said in the log once.

// TopologyReader is what the core asks Slurm of its network topology
// (slurmcmd.Runner).
type TopologyReader interface {
	Topology(ctx context.Context) ([]slurmcmd.Leaf, error)
}

var _ TopologyReader = slurmcmd.Runner{}

const (
	// topologyTimeout bounds one read (scontrol, then a hostnames per
	// bracketed leaf).
	topologyTimeout = time.Minute
	// topologyRetry and topologyRetryMax space the retries of a failed
	// read (slurmctld is not answering yet at its start).
	topologyRetry    = 2 * time.Second
	topologyRetryMax = time.Minute
	// maxSwitchRooms bounds the rooms an owner of several nodes is
	// offered (each a choice of its quota's nodes under one switch).
	maxSwitchRooms = 64
	// maxLoggedNodes bounds the node names one log line lists.
	maxLoggedNodes = 16

	keySwitch = "cell_switch"
)

// topologyState is the leaves last read and the reader's goroutine.
type topologyState struct {
	reader TopologyReader // nil: never read (a Core made by New)
	kick   chan struct{}
	// leaves: the last read (nil: none yet, or Slurm has none); read:
	// one succeeded. Under mu.
	leaves     []slurmcmd.Leaf
	read       bool
	noneLogged bool
}

// startTopology starts the reader's goroutine (Open: not for tests' New).
func (c *Core) startTopology(r TopologyReader) {
	c.topo.reader, c.topo.kick = r, make(chan struct{}, 1)
	safego.Loop(c.log, "topology reader", func() { c.runTopology(c.stop) }, nil)
}

// askTopology asks the reader for a fresh read (never blocks; a read
// already asked for serves). Caller holds mu.
func (c *Core) askTopology() {
	if c.topo.kick == nil || !c.quotasOn() {
		return
	}
	select {
	case c.topo.kick <- struct{}{}:
	default:
	}
}

// runTopology reads the topology each time it is asked, retrying a
// failed read with a growing wait, until stop.
func (c *Core) runTopology(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-c.topo.kick:
		}
		wait, lastErr := topologyRetry, ""
		for !c.readTopologyOnce(&lastErr) && c.wantsTopology() {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, topologyRetryMax)
		}
	}
}

// wantsTopology: quotas are on, so a failed read is worth retrying.
func (c *Core) wantsTopology() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.quotasOn()
}

// readTopologyOnce reads and applies the topology; false when the read
// failed (logged when its error changed).
func (c *Core) readTopologyOnce(lastErr *string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), topologyTimeout)
	leaves, err := c.topo.reader.Topology(ctx)
	cancel()
	if err != nil {
		if err.Error() != *lastErr {
			*lastErr = err.Error()
			c.log.Warn("cannot read slurmctld's topology for the quotas' cells; retrying", keyErr, err)
		}
		return false
	}
	c.applyTopology(leaves)
	return true
}

// applyTopology takes a read's leaves and binds the quotas to them when
// they changed.
func (c *Core) applyTopology(leaves []slurmcmd.Leaf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	same := c.topo.read && slices.EqualFunc(c.topo.leaves, leaves, func(a, b slurmcmd.Leaf) bool {
		return a.Name == b.Name && slices.Equal(a.Nodes, b.Nodes)
	})
	c.topo.leaves, c.topo.read = leaves, true
	if leaves == nil && !c.topo.noneLogged {
		c.topo.noneLogged = true
		c.log.Info("slurmctld has no topology/tree switches nor topology/block blocks: the quotas' cells take the nodes as one switch")
	}
	if same || !c.quotasOn() || c.cluster.nodes == nil {
		return
	}
	b, err := bindQuotas(c.configPath, c.cfg.Quota, c.cluster.nodes, leaves)
	if err != nil {
		c.log.Error("the quotas do not fit the cluster's switches; they keep their binding", keyErr, err)
		return
	}
	c.cluster.binding = b
	c.logBinding(b, "switches")
}

// boundQuotas is the quotas bound to the cluster's cells, with what the
// log and the reclaim name them by.
type boundQuotas struct {
	*quota.Binding
	tree     *cells.Tree
	nodes    []ClusterNode // the tree's nodes, in its order
	switches []string      // the tree's switches' names
}

// bindQuotas binds q's quotas to the GPU nodes under Slurm's leaves (nil
// leaves: one switch of them all). nil when q holds none: the shape is
// then not checked at all, as before quotas.
func bindQuotas(path string, q config.Quota, nodes []ClusterNode, leaves []slurmcmd.Leaf) (*boundQuotas, error) {
	if len(q.Accounts) == 0 {
		return nil, nil
	}
	topo, order := clusterTopology(nodes, leaves)
	if len(order) == 0 {
		return nil, fmt.Errorf("%s: %w: quota.accounts: the cluster has no node with gres/gpu", path, ErrQuotaUnfit)
	}
	tree, err := cells.New(topo)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrQuotaUnfit, err)
	}
	b, err := quota.Bind(tree, q.Accounts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, ErrQuotaUnfit, err)
	}
	bq := &boundQuotas{Binding: b, tree: tree, nodes: order}
	for _, sw := range topo.Switches {
		bq.switches = append(bq.switches, sw.Name)
	}
	return bq, nil
}

// clusterTopology is the GPU nodes as cells' topology: under Slurm's
// leaves in their order (a node under none is a switch of its own, as
// Slurm cannot place a job of several nodes across it), or one switch of
// them all without leaves; and the nodes in the tree's order.
func clusterTopology(nodes []ClusterNode, leaves []slurmcmd.Leaf) (cells.Topology, []ClusterNode) {
	var topo cells.Topology
	var order []ClusterNode
	add := func(name string, ns []ClusterNode) {
		sw := cells.Switch{Name: name}
		for _, n := range ns {
			sw.Nodes = append(sw.Nodes, cells.Node{Name: n.Name, GPUs: n.GPUs})
			order = append(order, n)
		}
		if len(sw.Nodes) > 0 {
			topo.Switches = append(topo.Switches, sw)
		}
	}
	gpuNodes := slices.DeleteFunc(slices.Clone(nodes), func(n ClusterNode) bool { return n.GPUs <= 0 })
	if leaves == nil {
		add("cluster", gpuNodes)
		return topo, order
	}
	byName := make(map[string]ClusterNode, len(gpuNodes))
	for _, n := range gpuNodes {
		byName[n.Name] = n
	}
	placed := map[string]bool{}
	for _, l := range leaves {
		var ns []ClusterNode
		for _, name := range l.Nodes {
			if n, ok := byName[name]; ok && !placed[name] {
				placed[name] = true
				ns = append(ns, n)
			}
		}
		add(l.Name, ns)
	}
	for _, n := range gpuNodes {
		if !placed[n.Name] {
			add("none:"+n.Name, []ClusterNode{n})
		}
	}
	return topo, order
}

// logBinding says where each account's cells lie: its switches and nodes.
func (c *Core) logBinding(b *boundQuotas, source string) {
	for i, acct := range b.Accounts {
		var sws, nodes []string
		for _, cell := range b.Cells[i] {
			cl := b.tree.Cell(cell)
			if s := b.switches[cl.Switch]; !slices.Contains(sws, s) {
				sws = append(sws, s)
			}
			if n := b.nodes[cl.Node].Name; !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
		c.log.Info("quota cells bound", keyAccount, acct, "quota", b.Specs[i].String(), keySwitch, strings.Join(sws, ","),
			"nodes", listNames(nodes), "cells", len(b.Cells[i]), keySource, source)
	}
}

// listNames is names comma-separated, at most maxLoggedNodes of them.
func listNames(names []string) string {
	if len(names) > maxLoggedNodes {
		return strings.Join(names[:maxLoggedNodes], ",") + fmt.Sprintf(",…(%d more)", len(names)-maxLoggedNodes)
	}
	return strings.Join(names, ",")
}

// runningNodes is where a running job's GPUs are: its nodes' indexes in
// Slurm's node table; nil when the plugin did not say (a job on several
// nodes without its list).
func runningNodes(s *Snapshot) []int32 {
	switch {
	case s.NodeCount == 1:
		return []int32{s.FirstNode}
	case s.NodeCount > 1 && len(s.Nodes) == int(s.NodeCount):
		return s.Nodes
	}
	return nil
}

// gpusOn is the share of a job's gpus on its k-th of n nodes: Slurm
// spreads --gpus-per-node evenly; an uneven --gpus is taken as spread so.
func gpusOn(gpus, n, k int) int {
	g := gpus / n
	if k < gpus%n {
		g++
	}
	return g
}

// chargeNodes adds a running job's GPUs to the nodes it runs on; a job
// on several nodes whose nodes are unknown marks its first node full.
func chargeNodes(usedOn map[int32]int, s *Snapshot, nodes []int32, gpus int) {
	if nodes == nil {
		if s.NodeCount > 1 {
			usedOn[s.FirstNode] = maxNodeUse
		}
		return
	}
	for k, n := range nodes {
		usedOn[n] = min(maxNodeUse, usedOn[n]+gpusOn(gpus, len(nodes), k))
	}
}

// maxNodeUse stands for a node no reclaim can count free.
const maxNodeUse = 1 << 30

// switchRooms are the rooms of an owner's job of several whole nodes:
// every choice of as many of its account's quota nodes as the job needs,
// all under one leaf switch (at most maxSwitchRooms), and the borrowers
// on them. nil when its account holds no such nodes: the reclaim then
// counts GPUs over the cluster. Caller holds mu.
func (c *Core) switchRooms(account string, gpus int, cands []quota.Candidate, candNodes map[uint32][]int32,
	usedOn map[int32]int) *cellRooms {
	b := c.cluster.binding
	i := b.Index(account)
	if i < 0 {
		return nil
	}
	// The account's whole nodes, by switch, in the tree's order.
	var order []int
	bySwitch := map[int][]int{}
	for _, cell := range b.Cells[i] {
		cl := b.tree.Cell(cell)
		if cl.Level != cells.LevelNode {
			continue
		}
		if _, ok := bySwitch[cl.Switch]; !ok {
			order = append(order, cl.Switch)
		}
		bySwitch[cl.Switch] = append(bySwitch[cl.Switch], cl.Node)
	}
	cr := &cellRooms{}
	for _, sw := range order {
		tn := bySwitch[sw]
		need := (gpus + b.nodes[tn[0]].GPUs - 1) / b.nodes[tn[0]].GPUs
		combos(len(tn), need, maxSwitchRooms-len(cr.rooms), func(pick []int) {
			room := quota.Room{ID: int(b.nodes[tn[pick[0]]].Index)}
			var names []string
			var idx []int32
			in := map[int32]bool{}
			for _, p := range pick {
				n := b.nodes[tn[p]]
				room.GPUs += n.GPUs
				room.Free += max(0, n.GPUs-usedOn[n.Index])
				names = append(names, n.Name)
				idx = append(idx, n.Index)
				in[n.Index] = true
			}
			ri := len(cr.rooms)
			cr.rooms = append(cr.rooms, room)
			cr.names = append(cr.names, strings.Join(names, ","))
			cr.nodeIdx = append(cr.nodeIdx, idx)
			cr.switches = append(cr.switches, b.switches[sw])
			for _, cand := range cands {
				nodes := candNodes[cand.Job]
				held := 0
				for k, n := range nodes {
					if in[n] {
						held += gpusOn(cand.GPUsIn, len(nodes), k)
					}
				}
				if held > 0 {
					cand.Room, cand.GPUsIn = ri, held
					cr.cands = append(cr.cands, cand)
				}
			}
		})
	}
	if len(cr.rooms) == 0 {
		return nil
	}
	return cr
}

// combos calls f with each choice of k of 0..n-1 (ascending), at most
// limit of them.
func combos(n, k, limit int, f func([]int)) {
	if k < 1 || k > n || limit <= 0 {
		return
	}
	pick := make([]int, k)
	for i := range pick {
		pick[i] = i
	}
	for ; limit > 0; limit-- {
		f(slices.Clone(pick))
		i := k - 1
		for i >= 0 && pick[i] == n-k+i {
			i--
		}
		if i < 0 {
			return
		}
		pick[i]++
		for j := i + 1; j < k; j++ {
			pick[j] = pick[j-1] + 1
		}
	}
}
