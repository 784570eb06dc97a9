package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
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

// pruneFinished forgets the finished jobs slurmctld no longer lists.
func (c *Core) pruneFinished() {
	for id := range c.finished {
		if !c.seen[id] {
			delete(c.finished, id)
		}
	}
}
