package sharing

import (
	"errors"
	"math"
	"testing"
)

func TestJudgePair(t *testing.T) {
	nan := math.NaN()
	c := Config{MaxSlowdown: 0.05}
	for _, tc := range []struct {
		name         string
		r            PairRates
		revert, futi bool
	}{
		{"host_slowed_beyond_max_slowdown_is_reverted", PairRates{10, 8, nan, nan}, true, false},
		{"host_at_max_slowdown_is_kept", PairRates{100, 95, nan, nan}, false, false},
		{"guest_not_measured_alone_is_judged_on_the_host_alone", PairRates{10, 9.7, nan, 0.2}, false, false},
		{"pair_that_does_not_gain_is_reverted_as_futile", PairRates{10, 9.7, 10, 0.2}, true, true},
		{"pair_that_gains_is_kept", PairRates{10, 9.7, 10, 5}, false, false},
		{"host_slowed_and_pair_futile_is_reverted_for_the_host", PairRates{10, 5, 10, 0.1}, true, false},
		{"host_rates_not_numbers_decide_nothing", PairRates{0, 5, 10, 0.1}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := c.JudgePair(tc.r)
			if v.Revert != tc.revert || v.Futile != tc.futi {
				t.Fatalf("JudgePair(%+v) = %+v, want revert %v futile %v", tc.r, v, tc.revert, tc.futi)
			}
			// The rule the simulator applied before it called JudgePair.
			if want := c.RevertPair(tc.r.HostSolo, tc.r.HostShared, tc.r.GuestSolo, tc.r.GuestShared); v.Revert != want {
				t.Fatalf("JudgePair's revert %v, RevertPair's %v", v.Revert, want)
			}
		})
	}
}

func TestTableLearn(t *testing.T) {
	nan := math.NaN()
	keep, revert := PairVerdict{}, PairVerdict{Revert: true}
	seeded := func() *Table {
		tab := NewTable(Limits{})
		if err := tab.Seed("host", "guest", 0.5, 0.7); err != nil {
			t.Fatal(err)
		}
		return tab
	}
	t.Run("a_reverted_pair_is_marked_bad_once", func(t *testing.T) {
		tab := seeded()
		if marked, err := tab.Learn("host", "guest", revert, 0.8, nan); !marked || err != nil || !tab.Bad("host", "guest") {
			t.Fatalf("marked %v, err %v, bad %v", marked, err, tab.Bad("host", "guest"))
		}
		if marked, _ := tab.Learn("host", "guest", revert, 0.8, nan); marked {
			t.Fatal("marked again")
		}
	})
	t.Run("a_kept_pair_replaces_the_seed_capped", func(t *testing.T) {
		tab := seeded()
		tab.Learn("host", "guest", keep, 0.97, 5)
		if s, measured, _ := tab.Lookup("host", "guest"); !measured || s.Of != 0.97 || s.Beside != DefaultLimits().MaxFraction {
			t.Fatalf("pair %+v measured %v, want 0.97 and the cap", s, measured)
		}
	})
	t.Run("a_guest_not_measured_keeps_the_tables_figure", func(t *testing.T) {
		tab := seeded()
		tab.Learn("host", "guest", keep, 0.97, nan)
		if s, measured, _ := tab.Lookup("host", "guest"); !measured || s.Of != 0.97 || s.Beside != 0.7 {
			t.Fatalf("pair %+v measured %v, want 0.97 and the seed's 0.7", s, measured)
		}
	})
	t.Run("a_pair_with_neither_is_left_unmeasured", func(t *testing.T) {
		tab := NewTable(Limits{})
		tab.Learn("host", "guest", keep, 0.97, nan)
		if _, _, ok := tab.Lookup("host", "guest"); ok {
			t.Fatal("a pair without the guest's figure was stored")
		}
	})
	t.Run("a_bad_pair_stays_as_it_is", func(t *testing.T) {
		tab := seeded()
		tab.MarkBad("host", "guest")
		tab.Learn("host", "guest", keep, 0.99, 0.9)
		if s, measured, _ := tab.Lookup("host", "guest"); measured || s.Of != 0.5 || !tab.Bad("host", "guest") {
			t.Fatalf("bad pair now %+v measured %v", s, measured)
		}
	})
	t.Run("a_pair_without_both_names_is_left", func(t *testing.T) {
		tab := NewTable(Limits{})
		if marked, err := tab.Learn("", "guest", revert, 0.5, nan); marked || err != nil || tab.Len() != 0 {
			t.Fatalf("marked %v, err %v, %d entries", marked, err, tab.Len())
		}
	})
	t.Run("a_full_table_refuses_the_mark", func(t *testing.T) {
		tab := NewTable(Limits{MaxEntries: 1})
		tab.Seed("a", "b", 1, 1)
		if marked, err := tab.Learn("host", "guest", revert, 0.5, nan); marked || !errors.Is(err, ErrTableFull) {
			t.Fatalf("marked %v, err %v, want ErrTableFull", marked, err)
		}
	})
}
