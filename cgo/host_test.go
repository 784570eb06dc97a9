//go:build cgo

package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/core"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// openHost starts a real core on a real SQLite ledger in a temp dir.
func openHost(t *testing.T) *host {
	t.Helper()
	db := filepath.Join(t.TempDir(), "ledger.db")
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DBPath = db
	// The fallback lowers a held-back job at its first pass: these tests
	// are about the host's buffers and counts, not the wait (core's tests).
	cfg.Synergy.FallbackAfter = 0
	c, err := core.New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return newHost(c)
}

// hostPass runs h.pass the way lachesis_pass does, with Go values in
// place of the C arrays.
func hostPass(h *host, now int64, jobs []core.Snapshot) ([]core.Decision, int) {
	out := make([]core.Decision, len(jobs))
	n := h.pass(now, len(jobs),
		func(i int) core.Snapshot { return jobs[i] },
		func(i int, d *core.Decision) { out[i] = *d })
	return out, n
}

// hostFallback runs h.fallback the way lachesis_fallback does.
func hostFallback(h *host, now int64, nodes []core.NodeState, max int) []core.Shrink {
	out := make([]core.Shrink, max)
	n := h.fallback(now, len(nodes),
		func(i int) core.NodeState { return nodes[i] },
		max, func(i int, s *core.Shrink) { out[i] = *s })
	return out[:n]
}

// TestConcurrentPassFallbackAndPlaceShareTheBuffersSafely drives the entry
// points slurmctld's plugins call from several goroutines at once, at one
// now, so every pass must decide what a lone pass decides and the enlarged
// job must be shrunk exactly once. Under -race it also proves that every
// use of the reused buffers is under the host's mutex: a conversion into
// them outside it (as lachesis_fallback once did) is reported as a race.
func TestConcurrentPassFallbackAndPlaceShareTheBuffersSafely(t *testing.T) {
	const (
		now        = 10_000
		goroutines = 4
		rounds     = 25
		enlargedID = 3
	)
	h := openHost(t)
	jobs := []core.Snapshot{
		{ID: 1, State: core.StateRunning, GPUs: 2, SubmitTime: 9_000, StartTime: 9_100},
		{ID: 2, State: core.StatePending, GPUs: 1, SubmitTime: 9_500},
		{ID: enlargedID, State: core.StatePending, GPUs: 1, SubmitTime: 9_000, WaitsForResources: true,
			AdminComment: "lachesis: model=x " + core.SizedMarker + " cpus=4 mem=1000 share_cpus=1 share_mem=1000]",
			CPUsPerTRES:  "gres/gpu:4", MemPerTRES: "gres/gpu:1000"},
	}
	// A free GPU but only 2 free CPUs: the job fits at its share of 1 CPU
	// per GPU, not at the 4 it was enlarged to.
	nodes := []core.NodeState{{CPUs: 4, AllocCPUs: 2, GPUs: 2, AllocGPUs: 1, MemMB: 8000, Usable: true}}
	placed := core.Snapshot{ID: 99, State: core.StatePending, GPUs: 1, SubmitTime: 9_900}

	// What one pass alone decides, before any fallback marks the job tried.
	want, candidates := hostPass(h, now, jobs)
	if candidates != 1 {
		t.Fatalf("a lone pass found %d fallback candidates, want 1 (job %d)", candidates, enlargedID)
	}

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		shrinks []core.Shrink
		errs    []string
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				got, _ := hostPass(h, now, jobs)
				sh := hostFallback(h, now, nodes, 16)
				p := h.core.Enqueue(now, &placed)
				mu.Lock()
				shrinks = append(shrinks, sh...)
				for i := range got {
					// The SystemComment marker is handed to Slurm once,
					// by whichever pass comes first: not a decision.
					got[i].Marker = want[i].Marker
					if got[i] != want[i] {
						errs = append(errs, "a concurrent pass decided differently from a lone one")
					}
				}
				if p.Priority == 0 {
					errs = append(errs, "a concurrent place left a new pending job at priority 0")
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	if len(errs) > 0 {
		t.Fatalf("%d wrong results, first: %s", len(errs), errs[0])
	}
	if len(shrinks) != 1 || shrinks[0].JobID != enlargedID || shrinks[0].CPUsPerGPU != 2 {
		t.Fatalf("shrinks = %+v, want job %d lowered once to the 2 CPUs per GPU the node spares", shrinks, enlargedID)
	}
}

func TestFallbackReturnsNoMoreShrinksThanTheCallerHasRoomFor(t *testing.T) {
	h := openHost(t)
	enlarged := "lachesis: model=x " + core.SizedMarker + " cpus=4 mem=1000 share_cpus=1 share_mem=1000]"
	var jobs []core.Snapshot
	for id := uint32(1); id <= 3; id++ {
		jobs = append(jobs, core.Snapshot{ID: id, State: core.StatePending, GPUs: 1, SubmitTime: 1_000,
			WaitsForResources: true, AdminComment: enlarged, CPUsPerTRES: "gres:gpu:4", MemPerTRES: "gres:gpu:1000"})
	}
	if _, n := hostPass(h, 2_000, jobs); n != 3 {
		t.Fatalf("candidates = %d, want 3", n)
	}
	nodes := []core.NodeState{{CPUs: 8, AllocCPUs: 6, GPUs: 8, MemMB: 64_000, Usable: true}}
	if got := hostFallback(h, 2_000, nodes, 2); len(got) != 2 {
		t.Fatalf("shrinks = %d with room for 2, want 2", len(got))
	}
}
