package profilestore

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// Cache is every model's latest profile, and every model's per-GPU
// throughput on each GPU type it was profiled on, in memory. Lookups do
// no I/O and wait at most for one map assignment, so job_submit/synergy
// and the priority pass may read it under slurmctld's locks.
//
// A profile arriving updates the cache in place: a flood of profiles
// costs slurmctld one map entry each, not a copy of every model's entry
// each (which was O(models) of time and garbage per profile). Readers of
// Throughputs get a published copy, which a flood republishes at most
// every typedPublishEvery.
type Cache struct {
	mu      sync.RWMutex // byModel: lookups read-lock, Offer writes in place
	byModel map[string]profile.Record

	typedMu     sync.Mutex  // guards typed, pending and published
	typed       *typedState // the live state, never handed out
	pending     bool        // a publication is scheduled
	publishedAt time.Time
	tput        atomic.Pointer[map[string]map[string]float64] // what readers see
}

// typedPublishEvery bounds how often a flood of typed profiles copies the
// throughput table for readers: a new table is visible at once when none
// was published within this, else by the end of it.
const typedPublishEvery = time.Second

// typedState is the live throughput table: tput per (model, type), and
// the finish time of the profile it came from, which orders arrivals.
type typedState struct {
	tput     map[string]map[string]float64
	finished map[string]map[string]time.Time
}

// NewCache returns a cache holding initial (e.g. Store.LatestAll) and the
// typed profiles byType (e.g. Store.LatestByType).
func NewCache(initial map[string]profile.Record, byType []profile.Record) *Cache {
	c := &Cache{byModel: maps.Clone(initial), typed: &typedState{tput: map[string]map[string]float64{}, finished: map[string]map[string]time.Time{}}}
	if c.byModel == nil {
		c.byModel = map[string]profile.Record{}
	}
	for _, r := range byType {
		c.typed.offer(r)
	}
	c.publishLocked(time.Time{})
	return c
}

// offer puts r's throughput into ts if it is the newest of its model and
// type, and reports whether it did.
func (ts *typedState) offer(r profile.Record) bool {
	tput, ok := r.PerGPUThroughput()
	if !ok {
		return false
	}
	typ, model := strings.ToLower(r.GPUType), strings.ToLower(r.Model)
	if f, ok := ts.finished[model][typ]; ok && !newer(r.Finished, f) {
		return false
	}
	if ts.tput[model] == nil {
		ts.tput[model] = map[string]float64{}
		ts.finished[model] = map[string]time.Time{}
	}
	ts.tput[model][typ] = tput
	ts.finished[model][typ] = r.Finished
	return true
}

// Profile returns model's latest profile.
func (c *Cache) Profile(model string) (profile.Record, bool) {
	c.mu.RLock()
	r, ok := c.byModel[model]
	c.mu.RUnlock()
	return r, ok
}

// Throughputs is model (lower case) → GPU type → per-GPU throughput of the
// model's latest profile on that type, as last published (shared: do not
// modify it).
func (c *Cache) Throughputs() map[string]map[string]float64 { return *c.tput.Load() }

// Len is how many models have a profile.
func (c *Cache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byModel)
}

// Offer keeps rec if it is newer than the model's cached profile (or the
// model has none) and reports whether it did; a typed rec also updates
// the model's throughput on its type when it is the newest there.
func (c *Cache) Offer(rec profile.Record) bool {
	if _, ok := rec.PerGPUThroughput(); ok {
		c.typedMu.Lock()
		if c.typed.offer(rec) {
			c.publishSoon()
		}
		c.typedMu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.byModel[rec.Model]; ok && !newer(rec.Finished, old.Finished) {
		return false
	}
	c.byModel[rec.Model] = rec
	return true
}

// publishSoon publishes the live table now if none was published within
// typedPublishEvery, else once that has passed; c.typedMu is held.
func (c *Cache) publishSoon() {
	if c.pending {
		return
	}
	now := time.Now()
	if wait := c.publishedAt.Add(typedPublishEvery).Sub(now); wait > 0 {
		c.pending = true
		time.AfterFunc(wait, func() {
			c.typedMu.Lock()
			defer c.typedMu.Unlock()
			c.pending = false
			c.publishLocked(time.Now())
		})
		return
	}
	c.publishLocked(now)
}

// publishLocked hands readers a copy of the live table; c.typedMu is held
// (or c is not shared yet).
func (c *Cache) publishLocked(now time.Time) {
	out := make(map[string]map[string]float64, len(c.typed.tput))
	for model, row := range c.typed.tput {
		out[model] = maps.Clone(row)
	}
	c.tput.Store(&out)
	c.publishedAt = now
}

// newer orders like Store.Latest: by finish time, a tie going to the later
// arrival.
func newer(a, b time.Time) bool { return !a.Before(b) }

// All returns a copy of every model's cached profile. The agent service
// stores them again when the file was deleted or replaced.
func (c *Cache) All() map[string]profile.Record {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.byModel)
}
