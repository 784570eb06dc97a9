package core

import (
	"errors"
	"fmt"
	"slices"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// The cluster's shape in the core (issue 35, item 5): every node and its
// configured GPUs, as Slurm's node table holds them (the plugin sends it
// before each pass, under the node read lock). The quotas are bound to it
// with quota.Bind, so a quota that the real cluster cannot hold is
// refused naming its key: at the first shape (slurmctld's start; the
// plugin stops slurmctld) and at every reconfigure (the previous config
// stays). Nodes without GPUs are no cells. topology/tree's switches are
// not read: the nodes are one switch, so a quota of several nodes is
// bound to any whole nodes.

// ClusterNode is one node as Slurm's node table has it.
type ClusterNode struct {
	Name string
	GPUs int
	// Index is the node's in Slurm's node table (Snapshot.FirstNode).
	Index int32
}

// MaxNodeNameLen bounds a node name the plugin sends (Slurm's own
// hostnames are far shorter); the names are interned like accounts.
const MaxNodeNameLen = priority.MaxAccountName

// clusterState is the last shape seen and the quotas bound to it.
type clusterState struct {
	nodes   []ClusterNode // nil until the plugin sent one
	binding *boundQuotas
	// refused is the last shape the quotas did not fit and why: sent
	// again at every pass, it is not bound again (a large cluster's tree
	// is not free to build).
	refused    []ClusterNode
	refusedErr error
}

// ErrQuotaUnfit is wrapped by the error of a quota the cluster cannot hold.
var ErrQuotaUnfit = errors.New("the quotas do not fit the cluster")

// SetCluster takes the cluster's shape. The first shape (start) or a
// changed one binds the configured quotas to it; when they do not fit,
// the error names the quota's key and, after the start, the quotas keep
// the binding they had (the caller logs it). The same shape again costs a
// comparison.
func (c *Core) SetCluster(nodes []ClusterNode) error {
	if len(nodes) > cells.MaxNodes {
		return fmt.Errorf("%w: %d nodes, at most %d", cells.ErrBadTopology, len(nodes), cells.MaxNodes)
	}
	for _, n := range nodes {
		if n.Name == "" || len(n.Name) > MaxNodeNameLen {
			return fmt.Errorf("%w: a node name of %d bytes (1 to %d)", cells.ErrBadTopology, len(n.Name), MaxNodeNameLen)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cluster.nodes != nil && slices.Equal(c.cluster.nodes, nodes) {
		return nil
	}
	if c.cluster.refused != nil && slices.Equal(c.cluster.refused, nodes) {
		return c.cluster.refusedErr
	}
	b, err := bindQuotas(c.configPath, c.cfg.Quota, nodes, c.topo.leaves)
	if err != nil && c.cfg.Quota.Source == config.QuotaFromSlurmdbd {
		err = fmt.Errorf("%w: %w", ErrQuotaUnfit, slurmdbdFitError(err)) // named where the admin set it
	}
	if err != nil {
		c.cluster.refused, c.cluster.refusedErr = slices.Clone(nodes), err
		return err
	}
	changed := c.cluster.nodes != nil
	c.cluster = clusterState{nodes: slices.Clone(nodes), binding: b}
	if b != nil {
		c.log.Info("quotas bound to the cluster", "nodes", len(nodes), "accounts", len(b.Accounts), "reshaped", changed,
			"switches", len(b.switches))
		c.logBinding(b, "node table")
	}
	c.askTopology()
	return nil
}
