package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The owner cache asks Slurm once per job per TTL (a refusal once per
// shorter TTL), forgets an ended job at once, and holds at most
// maxOwnerEntries jobs.
func TestOwnerCache(t *testing.T) {
	asked := map[uint32]int{}
	now := time.Unix(1_000_000, 0)
	c := newOwnerCache(func(_ context.Context, id uint32, _ string) (uint32, error) {
		asked[id]++
		if id == 9 {
			return 0, ErrNoJob
		}
		return 1000 + id, nil
	})
	c.now = func() time.Time { return now }
	for range 5 {
		if uid, err := c.owner(context.Background(), 1, "n"); uid != 1001 || err != nil {
			t.Fatalf("got %d, %v", uid, err)
		}
		if _, err := c.owner(context.Background(), 9, "n"); !errors.Is(err, ErrNoJob) {
			t.Fatalf("job 9: %v", err)
		}
	}
	if asked[1] != 1 || asked[9] != 1 {
		t.Fatalf("Slurm asked %v times; want once each", asked)
	}
	now = now.Add(ownerNegativeTTL)
	c.owner(context.Background(), 1, "n")
	c.owner(context.Background(), 9, "n")
	if asked[1] != 1 || asked[9] != 2 {
		t.Fatalf("after the negative TTL: asked %v; want job 1 once, job 9 twice", asked)
	}
	now = now.Add(ownerTTL)
	c.owner(context.Background(), 1, "n")
	if asked[1] != 2 {
		t.Fatalf("after the TTL: job 1 asked %d times, want 2", asked[1])
	}
	c.forget(1)
	c.owner(context.Background(), 1, "n")
	if asked[1] != 3 {
		t.Fatalf("after forget: job 1 asked %d times, want 3", asked[1])
	}
	for id := uint32(100); id < 100+3*maxOwnerEntries; id++ {
		c.owner(context.Background(), id, "n")
	}
	if n := len(c.m); n > maxOwnerEntries {
		t.Fatalf("%d entries cached, bound %d", n, maxOwnerEntries)
	}
}

// A lookup cut short by the caller hanging up is not cached as the job's
// answer.
func TestOwnerCacheKeepsNoCancelledAnswer(t *testing.T) {
	calls := 0
	c := newOwnerCache(func(ctx context.Context, _ uint32, _ string) (uint32, error) {
		calls++
		return 0, ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.owner(ctx, 1, "n")
	c.owner(ctx, 1, "n")
	if calls != 2 || len(c.m) != 0 {
		t.Fatalf("%d calls, %d cached", calls, len(c.m))
	}
}
