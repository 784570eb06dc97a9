package core

import (
	"errors"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Writer retry bounds: a failed write is retried after retryFirst, then
// twice as long each time up to retryMax, so a full or read-only disk
// costs one error line a minute, not one per pass, and a fixed disk is
// written within a minute.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
)

// fileStore is a store that can tell its file was deleted or replaced and
// open the new one (ledger.SQLite does).
type fileStore interface {
	CheckFile() error
	Reopen() error
}

var _ fileStore = (*ledger.SQLite)(nil)

// writerState is the writer goroutine's own bookkeeping; only it touches
// these fields.
type writerState struct {
	failures     int              // consecutive failed writes
	retry        <-chan time.Time // fires when the next retry is due; nil when none is
	backoff      time.Duration
	accountUsage []ledger.AccountUsage // scratch: the fair-share table being saved
}

const (
	keyAttempt = "attempt"
	keyRetryIn = "retry_in"
)

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
			if c.w.retry != nil {
				continue // backing off; the retry timer takes these too
			}
			c.flush()
		case <-c.w.retry:
			c.w.retry = nil
			c.flush()
			c.applyCorrections()
		case <-c.stop:
			c.flush()
			c.applyCorrections()
			return
		}
	}
}

// checkFile reopens the ledger when its file was deleted or replaced, and
// queues every active job's full record, since the new file has none of
// them. Without this, SQLite keeps writing to the unlinked file and the
// next start finds an empty ledger: every job back to zero service.
//
// It returns an error when the file is gone and could not be reopened:
// writing on would land in the unlinked file, so the batch must wait.
func (c *Core) checkFile(batch map[uint32]ledger.Record) error {
	err := c.store.CheckFile()
	if err == nil {
		return nil
	}
	if !errors.Is(err, ledger.ErrReplaced) {
		return err
	}
	c.log.Error("LEDGER FILE DELETED OR REPLACED; reopening it and rewriting every active job", keyErr, err)
	if err := c.store.Reopen(); err != nil {
		return err
	}
	c.mu.Lock()
	for id, r := range c.records {
		batch[id] = *r // the live record is at least as new as any queued copy
	}
	n := len(c.records)
	c.mu.Unlock()
	c.sharing.SaveAllExclusions()
	c.log.Warn("ledger reopened; active jobs queued for rewrite", keyJobs, n)
	return nil
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
	fileErr := c.checkFile(batch)
	if fileErr == nil {
		c.flushAccountUsage()
		c.sharing.Flush(c.store)
	}
	if len(batch) == 0 && fileErr == nil {
		return
	}
	c.batch = c.batch[:0]
	for _, r := range batch {
		c.batch = append(c.batch, r)
	}
	recs := c.batch
	err := fileErr
	if err == nil {
		err = c.store.Save(recs)
	}
	if err != nil {
		// Keep the batch: a record is dropped only once a newer copy of it
		// is queued, so nothing is lost while the disk is full or read-only.
		c.w.failures++
		c.w.backoff = min(max(2*c.w.backoff, retryFirst), retryMax)
		c.w.retry = time.After(c.w.backoff)
		c.log.Error("ledger write failed; keeping the records and retrying", keyErr, err,
			keyJobs, len(recs), keyAttempt, c.w.failures, keyRetryIn, c.w.backoff)
		c.pendMu.Lock()
		for id, r := range batch {
			if _, newer := c.pending[id]; !newer {
				c.pending[id] = r
			}
		}
		c.pendMu.Unlock()
		return
	}
	if c.w.failures > 0 {
		c.log.Warn("ledger writes resumed", keyAttempt, c.w.failures+1, keyJobs, len(recs))
		c.w.failures, c.w.backoff = 0, 0
	}
	for i := range recs {
		if recs[i].Finished != 0 {
			c.loadDistribution()
			break
		}
	}
}

// flushAccountUsage saves the latest fair-share table, if a pass queued one since
// the last save. A failed save leaves it queued: the next flush (a later
// pass or the retry) saves whatever table is newest then, so nothing older
// than one pass is lost while the disk is full.
func (c *Core) flushAccountUsage() {
	c.pendMu.Lock()
	if !c.accountUsageDirty {
		c.pendMu.Unlock()
		return
	}
	c.w.accountUsage = append(c.w.accountUsage[:0], c.pendAccountUsage...)
	c.accountUsageDirty = false
	c.pendMu.Unlock()
	if err := c.store.SaveUsage(c.w.accountUsage); err != nil {
		c.log.Error("saving fair-share usage failed; retrying with the next pass", keyErr, err)
		c.pendMu.Lock()
		c.accountUsageDirty = true
		c.pendMu.Unlock()
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
