package priority

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

// join is one Join call of a grouping case.
type join struct {
	id     uint32
	key    SiblingKey
	submit int64
}

func TestSiblingsGroupsSweeps(t *testing.T) {
	alice := SiblingKey{User: 1000, Account: "vision", GPUs: 1}
	cases := []struct {
		name  string
		joins []join
		done  uint32 // this member ends with 100 GPU-s
		// siblings: members that must see the sample; strangers: must not
		siblings, strangers []uint32
	}{
		{
			name:     "jobs submitted within the window share a sweep",
			joins:    []join{{1, alice, 0}, {2, alice, 300}},
			done:     1,
			siblings: []uint32{2},
		},
		{
			name:      "a gap longer than the window starts a new sweep",
			joins:     []join{{1, alice, 0}, {2, alice, 601}},
			done:      1,
			strangers: []uint32{2},
		},
		{
			name:     "the window runs from the latest member, so a steady sweep stays one",
			joins:    []join{{1, alice, 0}, {2, alice, 500}, {3, alice, 1000}, {4, alice, 1600}},
			done:     1,
			siblings: []uint32{2, 3, 4},
		},
		{
			name:     "a member observed out of order inside the window still joins",
			joins:    []join{{2, alice, 400}, {1, alice, 0}},
			done:     2,
			siblings: []uint32{1},
		},
		{
			name: "another user's job of the same account and width is never a sibling",
			joins: []join{{1, alice, 0},
				{2, SiblingKey{User: 1001, Account: "vision", GPUs: 1}, 10}},
			done:      1,
			strangers: []uint32{2},
		},
		{
			name:      "a job of another width is never a sibling",
			joins:     []join{{1, alice, 0}, {2, SiblingKey{User: 1000, Account: "vision", GPUs: 8}, 10}},
			done:      1,
			strangers: []uint32{2},
		},
		{
			name:      "a job of another account is never a sibling",
			joins:     []join{{1, alice, 0}, {2, SiblingKey{User: 1000, Account: "nlp", GPUs: 1}, 10}},
			done:      1,
			strangers: []uint32{2},
		},
		{
			name:      "a job of another partition is never a sibling",
			joins:     []join{{1, alice, 0}, {2, SiblingKey{User: 1000, Account: "vision", GPUs: 1, Partition: "long"}, 10}},
			done:      1,
			strangers: []uint32{2},
		},
		{
			name:      "a job between two sweeps of its key joins the one whose span holds it",
			joins:     []join{{1, alice, 0}, {2, alice, 5000}, {3, alice, 4500}},
			done:      2,
			siblings:  []uint32{3},
			strangers: []uint32{1},
		},
		{
			name:      "an early member replayed after later ones (a restart) joins their sweep",
			joins:     []join{{3, alice, 1000}, {2, alice, 500}, {1, alice, 0}, {9, alice, 5000}},
			done:      3,
			siblings:  []uint32{1, 2},
			strangers: []uint32{9},
		},
		{
			name:     "joining again (a later pass, a requeue) keeps the first sweep",
			joins:    []join{{1, alice, 0}, {1, alice, 90000}, {2, alice, 100}},
			done:     2,
			siblings: []uint32{1},
		},
		{
			name:      "the member that ended does not predict itself",
			joins:     []join{{1, alice, 0}},
			done:      1,
			strangers: []uint32{1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSiblings(600)
			for _, j := range c.joins {
				s.Join(j.id, j.key, j.submit)
			}
			for _, id := range append(c.siblings, c.strangers...) {
				if s.Of(id) != nil {
					t.Fatalf("job %d has completed siblings before any ended", id)
				}
			}
			s.Done(c.done, 100)
			for _, id := range c.siblings {
				if d := s.Of(id); d.Len() != 1 || d.sorted[0] != 100 {
					t.Errorf("job %d: siblings %v, want the one sample of job %d", id, d, c.done)
				}
			}
			for _, id := range c.strangers {
				if d := s.Of(id); d != nil {
					t.Errorf("job %d: got %d sibling samples, want none", id, d.Len())
				}
			}
		})
	}
}

func TestSiblingsOffIsNil(t *testing.T) {
	for _, w := range []float64{0, -1, math.NaN()} {
		s := NewSiblings(w)
		if s != nil {
			t.Fatalf("NewSiblings(%v) = %v, want nil (off)", w, s)
		}
		// Every method is a no-op on the nil tracker.
		s.Join(1, SiblingKey{}, 0)
		s.Join(2, SiblingKey{}, 0)
		s.Done(1, 5)
		s.Prune(1e9)
		if s.Of(2) != nil || s.Len() != 0 {
			t.Fatalf("the nil tracker grouped jobs")
		}
	}
}

func TestSiblingsKeepTheMostRecentSamples(t *testing.T) {
	s := NewSiblings(600)
	key := SiblingKey{User: 7, GPUs: 2}
	const n = MaxSiblingSamples + 6
	for id := uint32(1); id <= n+1; id++ {
		s.Join(id, key, int64(id))
	}
	for id := uint32(1); id <= n; id++ {
		s.Done(id, float64(id))
	}
	d := s.Of(n + 1)
	if d.Len() != MaxSiblingSamples {
		t.Fatalf("the last member sees %d samples, want %d", d.Len(), MaxSiblingSamples)
	}
	if lo := d.sorted[0]; lo != float64(n-MaxSiblingSamples+1) {
		t.Errorf("oldest sample kept is %v, want %v: the oldest ones go first", lo, n-MaxSiblingSamples+1)
	}
	if s.Len() != 1 {
		t.Errorf("%d jobs tracked, want 1 (the others ended)", s.Len())
	}
}

func TestSiblingsDoneWithBadGPUTimeEndsMembershipWithoutASample(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1), -1} {
		s := NewSiblings(600)
		s.Join(1, SiblingKey{}, 0)
		s.Join(2, SiblingKey{}, 0)
		s.Done(1, bad)
		if s.Of(2) != nil {
			t.Errorf("Done(%v) gave the sweep a sample", bad)
		}
		if s.Len() != 1 {
			t.Errorf("Done(%v): %d jobs tracked, want 1", bad, s.Len())
		}
		s.Done(99, 5) // never joined: ignored
	}
}

// Issue 26.11: a member that did not complete (cancelled, failed) ends its
// membership without a sample, so cancelling jobs sets no sweep's index.
func TestSiblingsLeaveEndsMembershipWithoutASample(t *testing.T) {
	s := NewSiblings(600)
	key := SiblingKey{User: 1, Account: "a", GPUs: 1, Partition: "gpu"}
	s.Join(1, key, 0)
	s.Join(2, key, 10)
	s.Join(3, key, 20)
	s.Leave(1)
	if s.Of(3) != nil || s.Len() != 2 {
		t.Fatalf("Leave gave the sweep a sample (%v) or kept the member (%d tracked)", s.Of(3), s.Len())
	}
	s.Done(2, 50)
	if d := s.Of(3); d.Len() != 1 || d.sorted[0] != 50 {
		t.Fatalf("after a completion: samples %v, want only the completed job's 50", d)
	}
	s.Leave(99) // never joined: ignored
	var off *Siblings
	off.Leave(1)
}

func TestSiblingsPruneForgetsOnlyFinishedOldSweeps(t *testing.T) {
	s := NewSiblings(600)
	a, b := SiblingKey{User: 1}, SiblingKey{User: 2}
	s.Join(1, a, 0)
	s.Join(2, b, 0)
	s.Done(1, 10)
	s.Prune(600) // within the window: a may still get members
	if len(s.byKey) != 2 {
		t.Fatalf("pruned inside the window: %d keys kept, want 2", len(s.byKey))
	}
	s.Prune(601)
	if _, ok := s.byKey[a]; ok {
		t.Error("a sweep with no active member past its window was kept")
	}
	if _, ok := s.byKey[b]; !ok {
		t.Error("a sweep with an active member was forgotten")
	}
}

func TestRankUsesCompletedSiblingsUntilTheJobOutlivesThem(t *testing.T) {
	// Cluster-wide history: one job in five reaches 10 GPU-s. In the last
	// queue (service >= 5, Δ = ∞) the global index is 1/(10 − a).
	dist, err := NewDistribution([]float64{1, 2, 3, 4, 10})
	if err != nil {
		t.Fatal(err)
	}
	sweep := historyOf(7, 6.5)
	cfg := testConfig()
	cfg.Mode = ModeGittins
	cfg.FixThresholds([]float64{5})
	r := mustRanker(t, cfg, dist)
	cases := []struct {
		name         string
		job          Job
		wantIndex    float64
		wantSiblings int
	}{
		{"a job below its sweep's longest member is ranked by the sweep",
			Job{ID: 1, Service: 6, Queue: 1, Ran: true, Siblings: sweep}, 2.0 / (0.5 + 1), 2},
		{"a job past every member of its sweep is ranked by the cluster's history",
			Job{ID: 2, Service: 7.5, Queue: 1, Ran: true, Siblings: sweep}, 1 / 2.5, 0},
		{"a job without completed siblings is ranked by the cluster's history",
			Job{ID: 3, Service: 8, Queue: 1, Ran: true}, 1 / 2.0, 0},
		{"a job whose service is all inherited (it has not run) is ranked by the cluster's history",
			Job{ID: 5, Service: 6, Queue: 1, Siblings: sweep}, 1 / 4.0, 0},
		{"a job that has not run is ranked by the cluster's history, whatever its sweep says",
			Job{ID: 4, Service: 0, Siblings: historyOf(0.5)}, 4.0 / 15, 0},
	}
	jobs := make([]Job, len(cases))
	for i, c := range cases {
		jobs[i] = c.job
	}
	got := r.Rank(now, jobs, nil)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := got[i].Factors
			if math.Abs(f.Gittins-c.wantIndex) > 1e-12 || f.SiblingSamples != c.wantSiblings {
				t.Errorf("index %.15g from %d siblings, want %.15g from %d", f.Gittins, f.SiblingSamples, c.wantIndex, c.wantSiblings)
			}
		})
	}
	// About to finish by its sweep, job 1 goes first in its queue although
	// the cluster's history gives it the most service left.
	if got[0].Rank > got[1].Rank || got[0].Rank > got[2].Rank {
		t.Errorf("the job its sweep says is about to end ranks %d, behind jobs 2 (%d) or 3 (%d) of its queue",
			got[0].Rank, got[1].Rank, got[2].Rank)
	}
}

func TestLASModeIgnoresSiblings(t *testing.T) {
	sweep := historyOf(7)
	r := mustRanker(t, testConfig(), nil)
	got := r.Rank(now, []Job{{ID: 1, Service: 6, Siblings: sweep}}, nil)
	if f := got[0].Factors; f.Gittins != 0 || f.SiblingSamples != 0 {
		t.Errorf("LAS mode used the sweep: %+v", f)
	}
}

func TestConfigRejectsBadSiblingWindow(t *testing.T) {
	for _, w := range []float64{-1, math.NaN(), math.Inf(1), MaxSiblingWindow + 1} {
		cfg := DefaultConfig()
		cfg.SiblingWindow = w
		err := cfg.Validate()
		var ke *configerr.KeyError
		if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ke) || ke.Key != "sibling_window" {
			t.Errorf("sibling_window %v: got %v, want a sibling_window KeyError", w, err)
		}
	}
}

func historyOf(v ...float64) *SweepHistory {
	h := &SweepHistory{}
	for _, x := range v {
		h.add(x)
	}
	return h
}

// However members end and are evicted, a sweep's index is the index of a
// Distribution of its MaxSiblingSamples most recent ends.
func TestSweepHistoryIndexEqualsTheDistributionOfItsRecentEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for range 300 {
		h := &SweepHistory{}
		var all []float64
		for range 1 + rng.IntN(3*MaxSiblingSamples) {
			v := math.Round(rng.ExpFloat64() * 50) // ties are common
			h.add(v)
			all = append(all, v)
		}
		recent := all[max(0, len(all)-MaxSiblingSamples):]
		d, err := NewDistribution(recent)
		if err != nil {
			t.Fatal(err)
		}
		if h.Len() != len(recent) || !slices.Equal(h.sorted, d.sorted) {
			t.Fatalf("history %v, want the sorted recent ends %v", h.sorted, d.sorted)
		}
		for range 20 {
			a := rng.Float64() * 1.2 * d.Quantile(1)
			delta := []float64{rng.Float64() * 100, math.Inf(1), 0}[rng.IntN(3)]
			got, ok := h.index(a, delta)
			if ok != (a < d.Quantile(1)) {
				t.Fatalf("a %v past the longest %v: applies = %v", a, d.Quantile(1), ok)
			}
			if want := d.Index(a, delta); ok && math.Abs(got-want) > 1e-9*max(1, want) {
				t.Fatalf("a %v, delta %v: index %v, the Distribution says %v", a, delta, got, want)
			}
		}
	}
}

func TestFullSweepHistoryAddsWithoutAllocating(t *testing.T) {
	h := &SweepHistory{}
	for i := range MaxSiblingSamples {
		h.add(float64(i))
	}
	v := 0.0
	if n := testing.AllocsPerRun(100, func() { v++; h.add(v) }); n != 0 {
		t.Fatalf("add allocates %v times once full, want 0", n)
	}
}
