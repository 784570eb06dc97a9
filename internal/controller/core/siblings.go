package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/priority"
)

// Sibling prediction (priority/siblings.go) in the core: each job joins the
// sweep of its user, account and GPU count by its first submit time, and
// each job's end gives its sweep one more sample. Sweeps live in memory
// only. After a restart the jobs slurmctld still has re-join their sweeps
// on the first pass (their keys and first submit times are in Slurm and
// the ledger), so only the samples of members that ended before the
// restart are lost: their siblings are ranked by the cluster-wide history
// until another member ends.

const (
	keySiblings = "completed_siblings"
	keyWindow   = "sibling_window_s"
)

// joinSweep places rec's job in its sweep (a no-op once placed, or with
// sibling prediction off) and gives j the sweep's completed members.
func (c *Core) joinSweep(s *Snapshot, rec *ledger.Record, j *priority.Job) {
	c.siblings.Join(s.ID, priority.SiblingKey{User: s.User, Account: s.Account, GPUs: j.GPUs}, rec.FirstSubmit)
	j.Siblings = c.siblings.Of(s.ID)
}

// noteSweepIndex logs the pass in which a job's Gittins index first comes
// from its sweep rather than the cluster-wide history, and when it stops
// (its service passed the longest sibling's), so an admin reading
// slurmctld's log sees why the job moved inside its queue.
func (c *Core) noteSweepIndex(id uint32, before, now Decision) {
	was, is := before.Factors.SiblingSamples, now.Factors.SiblingSamples
	switch {
	case was == 0 && is > 0:
		c.log.Info("job ranked inside its queue by its sweep's completed jobs", keyJob, id, keySiblings, is,
			keyService, now.Service)
	case was > 0 && is == 0:
		c.log.Info("job outlived its sweep's completed jobs; ranked by the cluster's history", keyJob, id,
			keyService, now.Service)
	}
}

// resizeSweeps makes a new tracker when the window changed (a reload):
// sweeps formed under the old window are dropped and re-formed on the next
// pass.
func (c *Core) resizeSweeps(old, now float64) {
	if old == now && (c.siblings != nil) == (now > 0) {
		return
	}
	c.siblings = priority.NewSiblings(now)
	c.log.Info("sibling window changed; sweeps re-form from the next pass", keyWindow, now)
}
