package priority

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func fairConfig() Config {
	cfg := testConfig()
	cfg.FairShare = DefaultFairShare()
	return cfg
}

func TestFairShareOrder(t *testing.T) {
	const over, under = 0.25, 1.0
	tests := []struct {
		name     string
		enabled  bool
		jobs     []Job
		wantRank map[uint32]int
	}{
		{
			name:    "under-share account's later job goes before flooding account's backlog in the same queue",
			enabled: true,
			jobs: []Job{
				{ID: 1, SubmitTime: 100, QueueEntry: 100, FairShare: over},
				{ID: 2, SubmitTime: 101, QueueEntry: 101, FairShare: over},
				{ID: 3, SubmitTime: 500, QueueEntry: 500, FairShare: under},
			},
			wantRank: map[uint32]int{3: 0, 1: 1, 2: 2},
		},
		{
			name:    "disabled fair share leaves FIFO inside the queue",
			enabled: false,
			jobs: []Job{
				{ID: 1, SubmitTime: 100, QueueEntry: 100, FairShare: over},
				{ID: 2, SubmitTime: 101, QueueEntry: 101, FairShare: over},
				{ID: 3, SubmitTime: 500, QueueEntry: 500, FairShare: under},
			},
			wantRank: map[uint32]int{1: 0, 2: 1, 3: 2},
		},
		{
			name:    "queues still decide first: an under-share job in Q1 stays behind an over-share job in Q0",
			enabled: true,
			jobs: []Job{
				{ID: 1, SubmitTime: 100, QueueEntry: 100, Service: 15, Queue: 1, FairShare: under},
				{ID: 2, SubmitTime: 200, QueueEntry: 200, FairShare: over},
			},
			wantRank: map[uint32]int{2: 0, 1: 1},
		},
		{
			name:    "accounts exactly at their share tie and FIFO decides",
			enabled: true,
			jobs: []Job{
				{ID: 1, SubmitTime: 100, QueueEntry: 100, FairShare: 0.5},
				{ID: 2, SubmitTime: 200, QueueEntry: 200, FairShare: under},
			},
			wantRank: map[uint32]int{1: 0, 2: 1},
		},
		{
			name:    "two over-share accounts keep FIFO between them",
			enabled: true,
			jobs: []Job{
				{ID: 1, SubmitTime: 100, QueueEntry: 100, FairShare: 0.1},
				{ID: 2, SubmitTime: 200, QueueEntry: 200, FairShare: 0.4},
			},
			wantRank: map[uint32]int{1: 0, 2: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fairConfig()
			cfg.FairShare.Enabled = tt.enabled
			r := mustRanker(t, cfg, nil)
			got := byID(r.Rank(now, tt.jobs, nil))
			for id, rank := range tt.wantRank {
				if got[id].Rank != rank {
					t.Errorf("job %d: rank %d, want %d", id, got[id].Rank, rank)
				}
			}
			// The priority order is the rank order.
			for a, ra := range tt.wantRank {
				for b, rb := range tt.wantRank {
					if ra < rb && !(got[a].Priority > got[b].Priority) {
						t.Errorf("job %d (rank %d) priority %d not above job %d (rank %d) priority %d",
							a, ra, got[a].Priority, b, rb, got[b].Priority)
					}
				}
			}
			for _, j := range tt.jobs {
				if got[j.ID].Factors.FairShare != j.FairShare {
					t.Errorf("job %d: factor %v recorded, want %v", j.ID, got[j.ID].Factors.FairShare, j.FairShare)
				}
			}
		})
	}
}

func TestFairShareFactors(t *testing.T) {
	tests := []struct {
		name      string
		loads     []AccountLoad
		wantOver  []bool
		wantExact []float64 // NaN: not checked
	}{
		{
			name:      "no usage anywhere puts every account at factor 1",
			loads:     []AccountLoad{{Shares: 1}, {Shares: 3}},
			wantOver:  []bool{false, false},
			wantExact: []float64{1, 1},
		},
		{
			name:      "account with all the usage is over its equal share, the idle one is not",
			loads:     []AccountLoad{{Shares: 1, Usage: 100}, {Shares: 1}},
			wantOver:  []bool{true, false},
			wantExact: []float64{0.25, 1},
		},
		{
			name:      "a single account is exactly at its share",
			loads:     []AccountLoad{{Shares: 5, Usage: 42}},
			wantOver:  []bool{false},
			wantExact: []float64{0.5},
		},
		{
			name:      "usage in proportion to shares leaves both accounts at their share",
			loads:     []AccountLoad{{Shares: 3, Usage: 300}, {Shares: 1, Usage: 100}},
			wantOver:  []bool{false, false},
			wantExact: []float64{0.5, 0.5},
		},
		{
			name:      "bigger shares absorb more usage before going over",
			loads:     []AccountLoad{{Shares: 9, Usage: 80}, {Shares: 1, Usage: 20}},
			wantOver:  []bool{false, true},
			wantExact: []float64{math.NaN(), math.NaN()},
		},
		{
			name:      "an account without shares is over whatever it used",
			loads:     []AccountLoad{{Shares: 0}, {Shares: 1, Usage: 10}},
			wantOver:  []bool{true, false},
			wantExact: []float64{0, 0.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			FairShareFactors(tt.loads)
			for i, l := range tt.loads {
				if OverShare(l.Factor) != tt.wantOver[i] {
					t.Errorf("account %d: factor %v, over share %v, want %v", i, l.Factor, OverShare(l.Factor), tt.wantOver[i])
				}
				if w := tt.wantExact[i]; !math.IsNaN(w) && math.Abs(l.Factor-w) > 1e-12 {
					t.Errorf("account %d: factor %v, want %v", i, l.Factor, w)
				}
			}
		})
	}
}

func TestDecayUsage(t *testing.T) {
	tests := []struct {
		name                     string
		usage, elapsed, halfLife float64
		want                     float64
	}{
		{"one half-life halves usage", 100, 3600, 3600, 50},
		{"two half-lives quarter usage", 100, 7200, 3600, 25},
		{"no time passed keeps usage", 100, 0, 3600, 100},
		{"clock stepped back keeps usage", 100, -50, 3600, 100},
		{"NaN elapsed keeps usage", 100, math.NaN(), 3600, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecayUsage(tt.usage, tt.elapsed, tt.halfLife); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFairShareSharesOf(t *testing.T) {
	f := DefaultFairShare()
	f.Shares = map[string]float64{"physics": 3}
	tests := []struct {
		name    string
		account string
		assoc   uint32
		want    float64
	}{
		{"association shares win over the config", "physics", 7, 7},
		{"config shares apply without an association", "physics", 0, 3},
		{"unknown account gets no shares by default", "biology", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.SharesOf(tt.account, tt.assoc); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFairShareValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*FairShare)
		wantKey string // "" = valid
	}{
		{"defaults are valid", func(*FairShare) {}, ""},
		{"half-life under a minute is rejected", func(f *FairShare) { f.HalfLife = 1 }, "half_life"},
		{"NaN half-life is rejected", func(f *FairShare) { f.HalfLife = math.NaN() }, "half_life"},
		{"zero default shares are the default", func(f *FairShare) { f.DefaultShares = 0 }, ""},
		{"negative default shares are rejected", func(f *FairShare) { f.DefaultShares = -1 }, "default_shares"},
		{"NaN default shares are rejected", func(f *FairShare) { f.DefaultShares = math.NaN() }, "default_shares"},
		{"negative account shares are rejected naming the account", func(f *FairShare) {
			f.Shares = map[string]float64{"physics": -1}
		}, "shares.physics"},
		{"empty account name is rejected", func(f *FairShare) { f.Shares = map[string]float64{"": 1} }, "shares"},
		{"overlong account name is rejected", func(f *FairShare) {
			f.Shares = map[string]float64{strings.Repeat("a", MaxAccountName+1): 1}
		}, "shares"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := DefaultFairShare()
			tt.mutate(&f)
			err := f.Validate()
			if tt.wantKey == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || err == nil || !strings.HasPrefix(err.Error(), tt.wantKey+":") {
				t.Fatalf("error %v, want one naming %q and wrapping ErrInvalidConfig", err, tt.wantKey)
			}
		})
	}
}

func TestNewRankerRejectsBadFairShareOnlyWhenEnabled(t *testing.T) {
	cfg := testConfig()
	cfg.FairShare = FairShare{Enabled: false} // zero half-life: fine while off
	if _, err := NewRanker(cfg, nil); err != nil {
		t.Fatalf("disabled fair share with zero values: %v", err)
	}
	cfg.FairShare.Enabled = true
	if _, err := NewRanker(cfg, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("enabled fair share with zero half-life: err %v, want ErrInvalidConfig", err)
	}
}

// Issue 20.6: without AccountingStorageEnforce=associations any user can
// name a fresh account. By default it has no share, so it is never better
// off than the user's real account, and it takes nothing from the shares
// the real accounts are measured against.
func TestAFreshAccountNameIsNoBetterThanARealOne(t *testing.T) {
	f := DefaultFairShare()
	f.Shares = map[string]float64{"physics": 1, "biology": 1}
	factors := func(f FairShare) (physics, biology, hopper float64) {
		var tab UsageTable
		tab.Decay(1000, f.HalfLife)
		tab.Charge("physics", 500) // the user's real account has used GPUs
		tab.Charge("biology", 100)
		tab.BeginPass()
		p := tab.Join("physics", f.SharesOf("physics", 0))
		b := tab.Join("biology", f.SharesOf("biology", 0))
		h := tab.Join("x31337", f.SharesOf("x31337", 0))
		tab.Settle()
		return tab.Factor(p), tab.Factor(b), tab.Factor(h)
	}
	physics, biology, hopper := factors(f)
	if hopper > physics || !OverShare(hopper) {
		t.Fatalf("fresh account's factor %v vs the real account's %v: the hop pays", hopper, physics)
	}
	// biology's factor is what it would be without the hopper: 2^-(U/S)
	// with U = 100/600 of the usage and S = 1/2 of the shares.
	if want := math.Exp2(-(100.0 / 600) / 0.5); math.Abs(biology-want) > 1e-12 {
		t.Fatalf("biology's factor %v, want %v: the fresh account diluted the shares", biology, want)
	}
	// The switch back: default_shares 1 gives every name a share.
	f.DefaultShares = 1
	if physics, _, hopper := factors(f); !(hopper > physics) {
		t.Fatalf("with default_shares 1 the fresh account (%v) should beat the used one (%v)", hopper, physics)
	}
}
