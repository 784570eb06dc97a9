package profilestore

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// Cache holds, in memory, every user's latest profile of each model they
// profiled, every model's latest published profile, and every model's
// per-GPU throughput on each GPU type from published profiles. Lookups do
// no I/O and wait at most for one map assignment, so job_submit/synergy
// and the priority pass may read it under slurmctld's locks.
//
// A profile arriving updates the owned map in place: a flood of profiles
// costs slurmctld one map entry each, not a copy of every profile (which
// was O(profiles) of time and garbage per profile). The published maps
// change only when an admin publishes, and are replaced whole.
type Cache struct {
	ownedMu sync.RWMutex // owned: lookups read-lock, Offer writes in place
	owned   map[Owner]profile.Record

	mu        sync.Mutex // serialises publication
	published atomic.Pointer[map[string]profile.Record]
	typed     atomic.Pointer[typedState]
	// publishedRecs is every published record the cache was given (by
	// model and by type), for storing them again; guarded by mu.
	publishedRecs []profile.Record
}

// Owner is a model profiled by one user.
type Owner struct {
	Model string
	UID   uint32
}

// typedState is replaced whole on every change: tput is what readers see,
// finished orders arrivals per (model, type).
type typedState struct {
	tput     map[string]map[string]float64
	finished map[string]map[string]time.Time
}

// NewCache returns a cache holding the owned profiles (e.g.
// Store.LatestOwned), the published ones (Store.LatestPublished) and the
// published typed profiles byType (Store.LatestByType).
func NewCache(owned []profile.Record, published map[string]profile.Record, byType []profile.Record) *Cache {
	c := &Cache{owned: make(map[Owner]profile.Record, len(owned))}
	for _, r := range owned {
		c.Offer(r)
	}
	c.SetPublished(published, byType)
	return c
}

// SetPublished replaces the published profiles and the per-type
// throughputs (they change only when an admin publishes).
func (c *Cache) SetPublished(published map[string]profile.Record, byType []profile.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := maps.Clone(published)
	if p == nil {
		p = map[string]profile.Record{}
	}
	c.published.Store(&p)
	c.publishedRecs = c.publishedRecs[:0]
	for _, r := range p {
		c.publishedRecs = append(c.publishedRecs, r)
	}
	c.publishedRecs = append(c.publishedRecs, byType...)
	ts := &typedState{tput: map[string]map[string]float64{}, finished: map[string]map[string]time.Time{}}
	for _, r := range byType {
		ts.offer(r)
	}
	c.typed.Store(ts)
}

// offer puts r's throughput into ts if it is the newest of its model and
// type; ts must not be shared yet.
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

// Profile returns the profile that sizes a job of user uid naming model:
// the user's own latest, else the model's published one.
func (c *Cache) Profile(model string, uid uint32) (profile.Record, bool) {
	c.ownedMu.RLock()
	r, ok := c.owned[Owner{model, uid}]
	c.ownedMu.RUnlock()
	if ok {
		return r, true
	}
	r, ok = (*c.published.Load())[model]
	return r, ok
}

// Throughputs is model (lower case) → GPU type → per-GPU throughput of the
// model's latest published profile on that type (shared: do not modify it).
func (c *Cache) Throughputs() map[string]map[string]float64 { return c.typed.Load().tput }

// Len is how many (model, user) pairs have a profile.
func (c *Cache) Len() int {
	c.ownedMu.RLock()
	defer c.ownedMu.RUnlock()
	return len(c.owned)
}

// Offer keeps rec as its owner's profile of its model if it is newer than
// the one cached (or there is none) and reports whether it did. A user's
// profile never changes what other users' jobs get, nor a speed.
func (c *Cache) Offer(rec profile.Record) bool {
	c.ownedMu.Lock()
	defer c.ownedMu.Unlock()
	k := Owner{rec.Model, rec.UID}
	if old, ok := c.owned[k]; ok && !newer(rec.Finished, old.Finished) {
		return false
	}
	c.owned[k] = rec
	return true
}

// newer orders like Store.Latest: by finish time, a tie going to the later
// arrival.
func newer(a, b time.Time) bool { return !a.Before(b) }

// Published returns every published profile the cache holds (a record may
// appear twice). The agent service stores and publishes them again when the
// file was deleted or replaced.
func (c *Cache) Published() []profile.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.publishedRecs)
}

// All returns every owned profile in the cache. The agent service stores
// them again when the file was deleted or replaced.
func (c *Cache) All() []profile.Record {
	c.ownedMu.RLock()
	defer c.ownedMu.RUnlock()
	out := make([]profile.Record, 0, len(c.owned))
	for _, r := range c.owned {
		out = append(out, r)
	}
	return out
}
