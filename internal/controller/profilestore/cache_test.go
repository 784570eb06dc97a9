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
	c := profilestore.NewCache(map[string]profile.Record{"bert": record("a", "bert", t0)}, nil)
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
			if r, ok := c.Profile("bert"); !ok || r.ID != tc.wantID {
				t.Fatalf("Profile(bert) = %q, want %q", r.ID, tc.wantID)
			}
		})
	}
	if _, ok := c.Profile("gpt"); ok {
		t.Fatal("unknown model found")
	}
}

func TestCacheReadsRaceFreeWithWrites(t *testing.T) {
	c := profilestore.NewCache(nil, nil)
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
			c.Profile("bert")
		}
	}()
	wg.Wait()
	if c.Len() != 1 {
		t.Fatalf("Len = %d", c.Len())
	}
}

func BenchmarkCacheProfile(b *testing.B) {
	c := profilestore.NewCache(map[string]profile.Record{"bert": record("a", "bert", t0)}, nil)
	for b.Loop() {
		c.Profile("bert")
	}
}

// BenchmarkCacheFlood offers profiles of new models to a cache that
// already holds n, the way a flood of profiles reaches slurmctld, while a
// reader looks profiles up as job_submit does. It reports the cost of one
// Offer, of one lookup during the flood, and the bytes allocated per
// Offer (garbage slurmctld's process must collect).
func BenchmarkCacheFlood(b *testing.B) {
	for _, gpuType := range []string{"", "a100"} {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("type=%s/models=%d", gpuType, n), func(b *testing.B) { cacheFlood(b, gpuType, n) })
		}
	}
}

// cacheFlood is BenchmarkCacheFlood with n models cached, every profile
// typed gpuType ("" = untyped).
func cacheFlood(b *testing.B, gpuType string, n int) {
	rec := func(m string) profile.Record {
		if gpuType == "" {
			return record(m, m, t0)
		}
		return typed(m, m, gpuType, t0, 100)
	}
	initial := make(map[string]profile.Record, n)
	var byType []profile.Record
	for i := range n {
		m := fmt.Sprint("m", i)
		initial[m] = rec(m)
		if gpuType != "" {
			byType = append(byType, initial[m])
		}
	}
	c := profilestore.NewCache(initial, byType)
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
			c.Profile("m1")
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
