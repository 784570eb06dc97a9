package core

import (
	"errors"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// Slurm 22.05's completion messages carry no end time: slurmctld sets a
// job's end when it receives them, so a job that ended during a controller
// outage ends, to Slurm, at the restart, and its GPU time would be charged
// for the whole outage. slurmstepd (SPANK plugin lachesis_jobend) tells the node agent when the
// job really ended; the agent spools and delivers that, and the listener
// hands it to ReportEnd. A report may only shorten the job's last run
// (ledger.CorrectedRun), so a forged or late one cannot raise a charge.

const (
	keyEnd    = "end"
	keyBefore = "before_gpu_s"
	keyAfter  = "after_gpu_s"
	keyNode   = "node"
)

// maxHeldEnds bounds the ends remembered for jobs still in memory; reports
// come from authenticated agents, one per job and node, so this is only a
// guard against a flood.
const maxHeldEnds = 1 << 16

// jobEnds holds the true ends nodes reported.
type jobEnds struct {
	// held: those of jobs still in memory; under mu.
	held map[uint32]int64
	// corrections: those of finished jobs, queued for the writer; under
	// pendMu.
	corrections []endReport
}

type endReport struct {
	job  uint32
	end  int64
	node string
}

// ReportEnd takes a node's report that job ended at end (Unix seconds).
// The earliest reported end is kept while slurmctld still lists the job
// (forget drops it after), so the pass that sees the job finished charges
// its last run up to that end. A job already finished before the report
// came has its completed-history entry and its ledger row corrected
// instead, by the writer goroutine, never under slurmctld's locks.
// Safe to call from any goroutine.
func (c *Core) ReportEnd(job uint32, end int64, node string) {
	if job == 0 || end <= 0 {
		return
	}
	c.mu.Lock()
	if old, held := c.ends.held[job]; !held || end < old {
		if held || len(c.ends.held) < maxHeldEnds {
			c.ends.held[job] = end
		}
	}
	_, active := c.records[job]
	c.mu.Unlock()
	if active {
		c.log.Info("node reported a job's end; applied when slurmctld completes it", keyJob, job, keyEnd, end, keyNode, node)
		return
	}
	c.pendMu.Lock()
	if len(c.ends.corrections) < maxHeldEnds {
		c.ends.corrections = append(c.ends.corrections, endReport{job: job, end: end, node: node})
	}
	c.pendMu.Unlock()
	c.signalWriter()
}

// applyCorrections corrects the history of finished jobs whose true end
// was reported; the writer calls it after flushing, so a completion queued
// in the same pass is on disk first. A report for a job with no history
// entry yet (its completion still to come through a pass) is dropped: the
// core held no record for it, so it is a job Lachesis never saw.
func (c *Core) applyCorrections() {
	c.pendMu.Lock()
	todo := c.ends.corrections
	c.ends.corrections = nil
	c.pendMu.Unlock()
	if len(todo) == 0 {
		return
	}
	changed := false
	for _, r := range todo {
		corr, did, err := c.store.CorrectEnd(r.job, r.end)
		switch {
		case errors.Is(err, ledger.ErrNoCompletion):
			c.log.Info("node reported the end of a job with no history entry; ignored", keyJob, r.job, keyNode, r.node)
		case err != nil:
			c.log.Error("correcting a job's GPU time failed", keyJob, r.job, keyErr, err)
		case did:
			changed = true
			c.log.Info("completed job's GPU time corrected to the node's end", keyJob, r.job, keyNode, r.node,
				keyEnd, r.end, keyBefore, corr.Before, keyAfter, corr.After)
		default:
			c.log.Debug("node's end does not lower the job's GPU time; kept", keyJob, r.job, keyEnd, r.end)
		}
	}
	if changed {
		c.loadDistribution()
	}
}
