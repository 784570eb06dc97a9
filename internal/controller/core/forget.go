package core

import (
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A pass's fifth and last stage, forget: what slurmctld no longer has.

// forget is a pass's fifth and last stage: jobs slurmctld no longer has
// (purged before a pass saw them end) are finished, and decisions made by
// Enqueue for jobs that were gone before any pass (cancelled at once),
// which have no record, are dropped, and so are the SystemComment markers
// of jobs that are gone.
func (c *Core) forget(now int64) {
	for id, rec := range c.records {
		if !c.seen[id] {
			// How it ended is unknown; its key is the one it was ranked
			// with, if any.
			key := priority.HeirKey{User: rec.Sweep.User, Account: rec.Sweep.Account, GPUs: rec.Sweep.GPUs}
			c.finish(rec, now, false, key, rec.InSweep)
		}
	}
	for id := range c.decisions {
		if !c.seen[id] {
			delete(c.decisions, id)
		}
	}
	c.pruneMarkers()
	c.pruneFinished()
	c.forgetPreemptions()
	c.siblings.Prune(now)
	c.heirs.Prune(now)
	c.throttles.prune(now)
	for id := range c.ends.held {
		if !c.seen[id] {
			delete(c.ends.held, id)
		}
	}
}
