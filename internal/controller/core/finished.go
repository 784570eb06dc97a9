package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A finished job stays in slurmctld's list for MinJobAge. The pass that
// sees it finish records it (completed-job history, its account's usage,
// its ledger row); later passes, and the first passes after a restart,
// skip it. Observing it again would build a fresh record of its last run
// alone, rewrite its ledger row with it and charge its account again. A
// node's later report of its true end reaches the history through
// ReportEnd instead.

// maxListedFinished bounds the finished jobs remembered at start-up: more
// than slurmctld lists at once (MaxJobCount, 10,000 by default).
const maxListedFinished = 1 << 17

// finishedEarlier says s is a job an earlier pass (or the core before a
// restart) already saw finish. A job with a record again (slurmctld can
// requeue a finished batch job) is observed as any other.
func (c *Core) finishedEarlier(s *Snapshot) bool {
	if s.State != StateFinished {
		return false
	}
	_, done := c.finished[s.ID]
	_, active := c.records[s.ID]
	return done && !active
}

// rememberFinished marks the jobs that finished before a restart, with
// their records; the first pass forgets those slurmctld does not list
// (pruneFinished).
func (c *Core) rememberFinished(store ledger.FinishedRecordLister) error {
	recs, err := store.FinishedRecords(maxListedFinished)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if _, active := c.records[r.JobID]; !active {
			// A copy each: a pointer into recs would keep the whole
			// slice alive after the first pass forgets most of them.
			c.finished[r.JobID] = &r
		}
	}
	return nil
}

// reopen continues the record of a job that finished and is active again:
// slurmctld requeues a finished batch job on `scontrol requeue` (its owner
// may ask, within MinJobAge). Its service, runs and queue carry on, as a
// preempted job's do; else the requeue would reset its owner's service to
// zero. Its end stays in the completed-job history.
func (c *Core) reopen(now int64, old *ledger.Record) *ledger.Record {
	rec := *old
	rec.Finished = 0
	rec.WaitingSince = now
	rec.LastRunStart, rec.LastRunGPUs, rec.LastRunSpeed = 0, 0, 0
	// It joins its sweep again as an active member (joinSweep).
	rec.Sweep, rec.InSweep, rec.SweepSample = priority.SiblingKey{}, false, false
	c.records[rec.JobID] = &rec
	delete(c.finished, rec.JobID)
	c.markDirty(&rec)
	c.log.Info("finished job requeued: its ledger record continues", keyJob, rec.JobID, keyService, rec.Total(),
		keyQueue, rec.Queue)
	return &rec
}

// pruneFinished forgets the finished jobs slurmctld no longer lists.
func (c *Core) pruneFinished() {
	for id := range c.finished {
		if !c.seen[id] {
			delete(c.finished, id)
		}
	}
}
