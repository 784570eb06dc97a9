package priority

import (
	"math"
	"testing"
)

func TestUsageTable(t *testing.T) {
	const halfLife = 100
	tests := []struct {
		name string
		run  func(u *UsageTable)
		// Usage expected afterwards (absent: not tracked).
		want map[string]float64
	}{
		{"charges add up", func(u *UsageTable) {
			u.Decay(1000, halfLife)
			u.Charge("a", 30)
			u.Charge("a", 20)
			u.Charge("b", 5)
		}, map[string]float64{"a": 50, "b": 5}},
		{"non-positive charges are ignored", func(u *UsageTable) {
			u.Charge("a", 10)
			u.Charge("a", -4)
			u.Charge("a", math.NaN())
		}, map[string]float64{"a": 10}},
		{"one half-life halves usage", func(u *UsageTable) {
			u.Decay(1000, halfLife)
			u.Charge("a", 80)
			u.Decay(1100, halfLife)
		}, map[string]float64{"a": 40}},
		{"a clock stepped back decays nothing", func(u *UsageTable) {
			u.Decay(1000, halfLife)
			u.Charge("a", 80)
			u.Decay(900, halfLife)
		}, map[string]float64{"a": 80}},
		{"restored usage decays from when it was saved", func(u *UsageTable) {
			u.Restore("a", 80, 1000)
			u.Restore("gone", 0, 1000)
			u.Decay(1200, halfLife)
		}, map[string]float64{"a": 20}},
		{"an account without jobs is forgotten once under a GPU-second", func(u *UsageTable) {
			u.Decay(1000, halfLife)
			u.Charge("a", 1.5)
			u.Charge("b", 1.5)
			u.Decay(1100, halfLife) // 0.75 each
			u.BeginPass()
			u.Join("b", 1)
			u.Settle()
		}, map[string]float64{"b": 0.75}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var u UsageTable
			tt.run(&u)
			if u.Len() != len(tt.want) {
				t.Errorf("tracks %d accounts, want %d", u.Len(), len(tt.want))
			}
			for name, want := range tt.want {
				if got, ok := u.Usage(name); !ok || math.Abs(got-want) > 1e-9 {
					t.Errorf("usage of %s = %v (%v), want %v", name, got, ok, want)
				}
			}
		})
	}
}

// A pass: every job of an account gets the account's factor, computed over
// the accounts with jobs only, with the shares of the account's first job.
func TestUsageTablePassFactors(t *testing.T) {
	var u UsageTable
	u.Decay(1000, 3600)
	u.Charge("heavy", 300)
	u.Charge("light", 100)
	u.Charge("idle", 1000) // no jobs this pass: not a competitor
	u.BeginPass()
	h1 := u.Join("heavy", 1)
	l := u.Join("light", 1)
	h2 := u.Join("heavy", 99) // later jobs' shares are not used
	u.Settle()
	if h1 != h2 || h1 == l || len(u.Loads()) != 2 || u.Name(h1) != "heavy" || u.Name(l) != "light" {
		t.Fatalf("indices heavy %d/%d light %d, loads %+v", h1, h2, l, u.Loads())
	}
	// heavy: usage ¾, shares ½: 2^(−1.5); light: 2^(−0.5).
	if got, want := u.Factor(h1), math.Exp2(-1.5); math.Abs(got-want) > 1e-12 {
		t.Errorf("heavy's factor %v, want %v", got, want)
	}
	if got, want := u.Factor(l), math.Exp2(-0.5); math.Abs(got-want) > 1e-12 {
		t.Errorf("light's factor %v, want %v", got, want)
	}
	if !OverShare(u.Factor(h1)) || OverShare(u.Factor(l)) {
		t.Error("heavy should be over its share and light under")
	}
	// The next pass starts afresh: idle's jobs are back, heavy's gone.
	u.BeginPass()
	i := u.Join("idle", 1)
	u.Settle()
	if len(u.Loads()) != 1 || u.Factor(i) != 0.5 {
		t.Errorf("alone, idle has factor %v (loads %+v), want 0.5: all the usage, all the shares", u.Factor(i), u.Loads())
	}
	if _, ok := u.Usage("heavy"); !ok {
		t.Error("heavy, with 300 GPU-s of usage, forgotten though it only has no jobs")
	}
}
