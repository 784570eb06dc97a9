package core

import "github.com/lachesis-sched/lachesis/policy/placement"

const (
	keyPrefer   = "prefer"
	keyMaxNodes = "max_nodes"
)

// PlacementEnabled says whether job_submit should ask PlaceJob at all.
func (c *Core) PlacementEnabled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Placement.Enabled
}

// PlaceJob decides a GPU-type preference and a node cap for a job being
// submitted (job_submit/synergy, after sizing). It runs under slurmctld's
// read locks: memory only.
func (c *Core) PlaceJob(req placement.Job, nodes []placement.TypedNode) placement.Placement {
	c.mu.Lock()
	cfg := c.cfg.Placement
	agents := c.agents
	c.mu.Unlock()
	if agents != nil {
		cfg.Profiled = agents.Throughputs() // lock-free snapshot
	}
	d := placement.Place(cfg, req, nodes)
	if d.Prefer != "" || d.MaxNodes != 0 {
		c.log.Debug("placement at submit", keyModel, d.ModelKey, keyPrefer, d.Prefer, keyMaxNodes, d.MaxNodes)
	}
	return d
}
