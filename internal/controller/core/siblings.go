package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Sibling prediction (policy/priority/siblings.go) in the core: each job joins the
// sweep of its user, account and GPU count by its first submit time, and
// each job's end gives its sweep one more sample. Sweeps live in memory;
// each ended job's key and first submit time go into the completed-job
// history with its GPU-time, and a restart replays the most recent of
// those (restoreSweeps) before the first pass, where the jobs slurmctld
// still has re-join their sweeps.

// maxReplayedSweepEnds bounds what a restart replays: sweeps are short-lived
// (a member ends, the rest follow), so the most recent ends are the ones
// whose siblings may still be waiting.
const maxReplayedSweepEnds = 16384

const (
	keySiblings = "completed_siblings"
	keyWindow   = "sibling_window_s"
)

// joinSweep places rec's job in its sweep (a no-op once placed, or with
// sibling prediction off) and gives j the sweep's completed members.
func (c *Core) joinSweep(s *Snapshot, rec *ledger.Record, j *priority.Job) {
	// Kept with the job's completion whether sweeps are on or not, so
	// turning them on later can replay it. Not a reason to save the
	// record now: the jobs table does not hold it. The key is the one the
	// job joined with (a pending job submitted to several partitions
	// lists them all; it keeps that key once it runs in one of them).
	if !rec.InSweep {
		rec.Sweep = priority.SiblingKey{User: s.User, Account: s.Account, GPUs: j.GPUs, Partition: s.Partition}
		rec.InSweep = true
	}
	c.siblings.Join(s.ID, rec.Sweep, rec.FirstSubmit)
	j.Siblings = c.siblings.Of(s.ID)
}

// restoreSweeps replays the ended sweep members the ledger kept, oldest
// submission first, into a fresh tracker. An empty history (or an error,
// logged) leaves the sweeps to re-form from new ends.
func (c *Core) restoreSweeps(store ledger.SweepLister) {
	if c.siblings == nil {
		return
	}
	ends, err := store.SweepEnds(maxReplayedSweepEnds)
	if err != nil {
		c.log.Error("sweep history unreadable; sweeps re-form from new ends", keyErr, err)
		return
	}
	for _, e := range ends {
		if _, active := c.records[e.JobID]; active {
			continue // requeued since: it joins as an active job
		}
		c.siblings.Join(e.JobID, e.Key, e.FirstSubmit)
		if e.Sample {
			c.siblings.Done(e.JobID, e.GPUSeconds)
		} else {
			c.siblings.Leave(e.JobID)
		}
	}
	c.log.Info("sweeps restored from the completed-job history", keyJobs, len(ends))
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
	c.log.Info("sibling window changed; sweeps re-formed from the history and the next pass", keyWindow, now)
	c.restoreSweeps(c.store)
}
