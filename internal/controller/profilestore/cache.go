package profilestore

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// Cache is every model's latest profile, in memory. Lookups take no lock and
// do no I/O, so job_submit/synergy may call Profile under slurmctld's
// locks; the rare updates (a profile arrives) copy the map.
type Cache struct {
	mu      sync.Mutex // serialises writers
	byModel atomic.Pointer[map[string]profile.Record]
}

// NewCache returns a cache holding initial (e.g. Store.LatestAll).
func NewCache(initial map[string]profile.Record) *Cache {
	c := &Cache{}
	m := maps.Clone(initial)
	if m == nil {
		m = map[string]profile.Record{}
	}
	c.byModel.Store(&m)
	return c
}

// Profile returns model's latest profile.
func (c *Cache) Profile(model string) (profile.Record, bool) {
	r, ok := (*c.byModel.Load())[model]
	return r, ok
}

// Len is how many models have a profile.
func (c *Cache) Len() int { return len(*c.byModel.Load()) }

// Offer keeps rec if it is newer than the model's cached profile (or the
// model has none) and reports whether it did.
func (c *Cache) Offer(rec profile.Record) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := *c.byModel.Load()
	if old, ok := cur[rec.Model]; ok && !newer(rec.Finished, old.Finished) {
		return false
	}
	next := maps.Clone(cur)
	next[rec.Model] = rec
	c.byModel.Store(&next)
	return true
}

// newer orders like Store.Latest: by finish time, a tie going to the later
// arrival.
func newer(a, b time.Time) bool { return !a.Before(b) }

// All returns every model's cached profile (the map is shared: do not
// modify it). The agent service stores them again when the file was
// deleted or replaced.
func (c *Cache) All() map[string]profile.Record { return *c.byModel.Load() }
