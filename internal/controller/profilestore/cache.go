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
// throughput on each GPU type it was profiled on, in memory. Lookups take
// no lock and do no I/O, so job_submit/synergy and the priority pass may
// read it under slurmctld's locks; the rare updates (a profile arrives)
// copy the maps.
type Cache struct {
	mu      sync.Mutex // serialises writers
	byModel atomic.Pointer[map[string]profile.Record]
	typed   atomic.Pointer[typedState]
}

// typedState is replaced whole on every change: tput is what readers see,
// finished orders arrivals per (model, type).
type typedState struct {
	tput     map[string]map[string]float64
	finished map[string]map[string]time.Time
}

// NewCache returns a cache holding initial (e.g. Store.LatestAll) and the
// typed profiles byType (e.g. Store.LatestByType).
func NewCache(initial map[string]profile.Record, byType []profile.Record) *Cache {
	c := &Cache{}
	m := maps.Clone(initial)
	if m == nil {
		m = map[string]profile.Record{}
	}
	c.byModel.Store(&m)
	ts := &typedState{tput: map[string]map[string]float64{}, finished: map[string]map[string]time.Time{}}
	for _, r := range byType {
		ts.offer(r)
	}
	c.typed.Store(ts)
	return c
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

// Profile returns model's latest profile.
func (c *Cache) Profile(model string) (profile.Record, bool) {
	r, ok := (*c.byModel.Load())[model]
	return r, ok
}

// Throughputs is model (lower case) → GPU type → per-GPU throughput of the model's
// latest profile on that type (shared: do not modify it).
func (c *Cache) Throughputs() map[string]map[string]float64 { return c.typed.Load().tput }

// Len is how many models have a profile.
func (c *Cache) Len() int { return len(*c.byModel.Load()) }

// Offer keeps rec if it is newer than the model's cached profile (or the
// model has none) and reports whether it did; a typed rec also updates
// the model's throughput on its type when it is the newest there.
func (c *Cache) Offer(rec profile.Record) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := rec.PerGPUThroughput(); ok {
		cur := c.typed.Load()
		next := &typedState{tput: maps.Clone(cur.tput), finished: maps.Clone(cur.finished)}
		// The model's own rows are copied before offer writes into them.
		model := strings.ToLower(rec.Model)
		next.tput[model] = maps.Clone(cur.tput[model])
		next.finished[model] = maps.Clone(cur.finished[model])
		if next.offer(rec) {
			c.typed.Store(next)
		}
	}
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
