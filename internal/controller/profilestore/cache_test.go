package profilestore_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/profile"
)

func TestCacheKeepsTheNewestProfilePerModel(t *testing.T) {
	c := profilestore.NewCache([]profile.Record{record("a", "bert", t0)}, nil, nil)
	tests := []struct {
		name   string
		offer  profile.Record
		kept   bool
		wantID string
	}{
		{"older profile is ignored", record("old", "bert", t0.Add(-time.Hour)), false, "a"},
		{"newer profile replaces", record("new", "bert", t0.Add(time.Hour)), true, "new"},
		{"same finish time replaces (later arrival)", record("tie", "bert", t0.Add(time.Hour)), true, "tie"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if kept := c.Offer(tc.offer); kept != tc.kept {
				t.Fatalf("Offer kept=%v, want %v", kept, tc.kept)
			}
			if r, ok := c.Profile("bert", 0); !ok || r.ID != tc.wantID {
				t.Fatalf("Profile(bert) = %q, want %q", r.ID, tc.wantID)
			}
		})
	}
	if _, ok := c.Profile("gpt", 0); ok {
		t.Fatal("unknown model found")
	}
}

func TestCacheReadsRaceFreeWithWrites(t *testing.T) {
	c := profilestore.NewCache(nil, nil, nil)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			c.Offer(record("x", "bert", t0.Add(time.Duration(i))))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ {
			c.Profile("bert", 0)
		}
	}()
	wg.Wait()
	if c.Len() != 1 {
		t.Fatalf("Len = %d", c.Len())
	}
}

func BenchmarkCacheProfile(b *testing.B) {
	c := profilestore.NewCache([]profile.Record{record("a", "bert", t0)}, nil, nil)
	for b.Loop() {
		c.Profile("bert", 0)
	}
}

// Issue 20 item 2: a profile sizes its owner's jobs only; another user's
// job of the same model gets the published profile, or none.
func TestCacheSizesAUsersJobsWithTheirOwnProfileElseThePublishedOne(t *testing.T) {
	mine := record("alice-bert", "bert", t0)
	mine.UID = 1001
	c := profilestore.NewCache([]profile.Record{mine}, nil, nil)
	if r, ok := c.Profile("bert", 1001); !ok || r.ID != "alice-bert" {
		t.Fatalf("alice's own profile: %q %v", r.ID, ok)
	}
	if r, ok := c.Profile("bert", 1002); ok {
		t.Fatalf("bob's job sized by alice's profile %q", r.ID)
	}
	// Bob's profile, newer, is his alone.
	bobs := record("bob-bert", "bert", t0.Add(time.Hour))
	bobs.UID = 1002
	c.Offer(bobs)
	if r, _ := c.Profile("bert", 1001); r.ID != "alice-bert" {
		t.Fatalf("bob's newer profile replaced alice's: %q", r.ID)
	}
	pub := record("pub-bert", "bert", t0)
	c.SetPublished(map[string]profile.Record{"bert": pub}, nil)
	if r, ok := c.Profile("bert", 1003); !ok || r.ID != "pub-bert" {
		t.Fatalf("a user without a profile gets %q %v, want the published one", r.ID, ok)
	}
	if r, _ := c.Profile("bert", 1002); r.ID != "bob-bert" {
		t.Fatalf("bob's own profile lost to the published one: %q", r.ID)
	}
}

// BenchmarkCacheFlood offers profiles of new models to a cache that
// already holds n, the way a flood of profiles reaches slurmctld, while a
// reader looks profiles up as job_submit does. It reports the cost of one
// Offer, of one lookup during the flood, and the bytes allocated per
// Offer (garbage slurmctld's process must collect). A user's profile never
// changes the per-type speeds (only a publication does), so typed and
// untyped profiles cost the same here.
func BenchmarkCacheFlood(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("models=%d", n), func(b *testing.B) { cacheFlood(b, n) })
	}
}

// cacheFlood is BenchmarkCacheFlood with n models cached.
func cacheFlood(b *testing.B, n int) {
	rec := func(m string) profile.Record { return record(m, m, t0) }
	initial := make([]profile.Record, 0, n)
	for i := range n {
		initial = append(initial, rec(fmt.Sprint("m", i)))
	}
	c := profilestore.NewCache(initial, nil, nil)
	stop := make(chan struct{})
	var lookups atomic.Int64
	var lookupNs atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			begin := time.Now()
			c.Profile("m1", 0)
			lookupNs.Add(int64(time.Since(begin)))
			lookups.Add(1)
		}
	}()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := fmt.Sprint("new", i)
		c.Offer(rec(m))
		i++
	}
	close(stop)
	<-done
	if l := lookups.Load(); l > 0 {
		b.ReportMetric(float64(lookupNs.Load())/float64(l), "ns/lookup")
	}
}
