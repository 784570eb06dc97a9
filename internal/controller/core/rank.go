package core

import (
	"log/slog"
	"slices"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A pass's third stage, rank: the ranker orders the jobs, each result is
// folded back into its record and becomes its decision.

// rank is a pass's third stage: the policy orders c.jobs (on the latest
// Gittins distribution), each Result is folded into the job's record
// (promotion, queue) and becomes its Decision.
func (c *Core) rank(now int64, snaps []Snapshot, out []Decision) {
	c.refreshRanker()
	c.results = c.ranker.Rank(now, c.jobs, c.results[:0])
	w := c.cfg.Tiresias.Weights
	for k := range c.results {
		res := &c.results[k]
		s := &snaps[c.jobIndex[k]]
		rec := c.records[s.ID]
		before := *rec
		c.met.queueChange(rec.Queue, res.Queue, res.Promoted)
		c.met.opportunistic(res.Opportunistic, c.jobs[k].State == priority.Running, res.Upgraded)
		promoted, moved := rec.Apply(now, *res)
		switch {
		case promoted:
			c.log.Info("job promoted to queue 0 (starvation)", keyJob, s.ID, keyService, rec.Total())
		case moved:
			c.log.Info("job changed queue", keyJob, s.ID, keyQueue, res.Queue, keyService, rec.Total())
		}
		if before.Upgraded == 0 && rec.Upgraded != 0 {
			c.log.Info("opportunistic job upgraded to guaranteed after waiting (sharing.promote_after)", keyJob, s.ID,
				keyWaited, now-rec.WaitingSince, keyQueue, res.Queue)
		}
		if *rec != before {
			c.markDirty(rec)
		}
		d := decide(w, *res, rec.Total(), rec.QueueService())
		d.Marker = c.markerFor(s, rec)
		c.noteSweepIndex(s.ID, c.decisions[s.ID], d)
		c.decisions[s.ID] = d
		out[c.jobIndex[k]] = d
	}
	c.preemption.view.fromPass(c.jobs, c.results, func(k int) *Snapshot { return &snaps[c.jobIndex[k]] })
	c.preemption.view.orderVictims(c.cfg.Tiresias.Preemption, c.jobs, c.results, func(id uint32) (int, float64) {
		return c.preemptions(id), c.candidate(id, 0, now).RunSeconds
	})
	c.showBlocked(now, out)
}

// refreshRanker rebuilds the ranker when the writer goroutine swapped in a
// new Gittins distribution since the last pass. Caller holds mu.
func (c *Core) refreshRanker() {
	d := c.dist.Load()
	if d == c.rankerDist {
		return
	}
	before := c.ranker.Config().Thresholds
	if err := c.rebuildRanker(); err != nil {
		c.log.Error("new Gittins distribution rejected", keyErr, err)
	} else if !slices.Equal(before, c.ranker.Config().Thresholds) {
		c.logThresholds(slog.LevelDebug, "new distribution")
	}
}

// preemptions is how many times the preemption rule had job id requeued,
// as its record says.
func (c *Core) preemptions(id uint32) int {
	if rec, ok := c.records[id]; ok {
		return rec.Preemptions
	}
	return 0
}
