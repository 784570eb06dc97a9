package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/priority"
)

// markDirty queues a copy of rec for the writer. Caller holds mu.
func (c *Core) markDirty(rec *ledger.Record) {
	c.pendMu.Lock()
	c.pending[rec.JobID] = *rec
	c.pendMu.Unlock()
}

func (c *Core) signalWriter() {
	select {
	case c.kick <- struct{}{}:
	default: // a flush is already due; it will take these records too
	}
}

// writer persists queued records off slurmctld's locks, one transaction
// per flush, and reloads the Gittins history when jobs complete. It returns
// when the core stops (safego restarts it after a panic).
func (c *Core) writer() {
	for {
		select {
		case <-c.kick:
			c.flush()
			c.applyCorrections()
		case <-c.stop:
			c.flush()
			c.applyCorrections()
			return
		}
	}
}

// flush writes everything queued so far. The two maps are swapped, not
// reallocated, so a steady stream of passes does not churn the heap.
func (c *Core) flush() {
	c.pendMu.Lock()
	batch := c.pending
	c.pending, c.spare = c.spare, nil
	if c.pending == nil {
		c.pending = make(map[uint32]ledger.Record, len(batch))
	}
	c.pendMu.Unlock()
	defer func() {
		clear(batch)
		c.pendMu.Lock()
		c.spare = batch
		c.pendMu.Unlock()
	}()
	if len(batch) == 0 {
		return
	}
	c.batch = c.batch[:0]
	for _, r := range batch {
		c.batch = append(c.batch, r)
	}
	recs := c.batch
	if err := c.store.Save(recs); err != nil {
		c.log.Error("ledger write failed; will retry with the next pass", keyErr, err, keyJobs, len(recs))
		c.pendMu.Lock()
		for id, r := range batch {
			if _, newer := c.pending[id]; !newer {
				c.pending[id] = r
			}
		}
		c.pendMu.Unlock()
		return
	}
	for i := range recs {
		if recs[i].Finished != 0 {
			c.loadDistribution()
			break
		}
	}
}

// loadDistribution swaps in the cluster's own GPU-time history once it has
// enough completed jobs, and the bundled seed until then.
func (c *Core) loadDistribution() {
	samples, total, err := c.store.CompletedGPUTimes(priority.LearnWindow)
	if err != nil || int64(total) < c.minHistory.Load() || len(samples) == 0 {
		if err != nil {
			c.log.Error("loading job history failed; using the seed distribution", keyErr, err)
		}
		if c.dist.Load() == nil {
			c.dist.Store(priority.SeedDistribution())
			c.log.Info("Gittins distribution", keySource, "seed", keySamples, priority.SeedDistribution().Len())
		}
		return
	}
	d, err := priority.NewDistribution(samples)
	if err != nil {
		c.log.Error("job history unusable; keeping the current distribution", keyErr, err)
		return
	}
	c.dist.Store(d)
	c.log.Debug("Gittins distribution", keySource, "history", keySamples, d.Len())
}
