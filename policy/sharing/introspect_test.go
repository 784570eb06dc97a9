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
		if s, measured, _ := tab.Lookup("host", "guest"); !measured || s.Of != 0.97 || s.Beside != 1 {
			t.Fatalf("pair %+v measured %v, want 0.97 and the physical cap 1", s, measured)
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

// Issue 34 item 3: one user's jobs poison the pair table for everyone. A
// user's own host and guest, named after other users' models, fake a
// slowdown (or store fractions above 1). What a party measured applies to
// its own two users' jobs only, to everyone only when Quorum parties with
// no user in common agree, and never for longer than MarkTTL; fractions
// are clamped to [0, 1].
func TestAPartysMeasurementReachesOtherUsersOnlyByQuorum(t *testing.T) {
	const now, ttl = 1_000_000, 3600
	revert, keep := PairVerdict{Revert: true}, PairVerdict{}
	mallory := Party{Host: "666", Guest: "666"}
	alice := Party{Host: "100", Guest: "200"} // another user's host and guest
	t.Run("a self-made bad mark keeps only its maker's guests away", func(t *testing.T) {
		tab := NewTable(Limits{Quorum: 2, MarkTTL: ttl})
		must(t, tab.Seed("resnet50", "bert", 0.99, 0.9))
		if marked, err := tab.LearnBy(mallory, now, "resnet50", "bert", revert, 0.5, math.NaN()); !marked || err != nil {
			t.Fatalf("marked %v, err %v", marked, err)
		}
		if !tab.For(mallory, now).Bad("resnet50", "bert") {
			t.Fatal("the mark does not apply to its own party")
		}
		if tab.For(alice, now).Bad("resnet50", "bert") {
			t.Fatal("one user's mark applies to another user's jobs")
		}
		if s, measured, ok := tab.For(alice, now).Lookup("resnet50", "bert"); !ok || measured || s.Of != 0.99 {
			t.Fatalf("another user sees %+v measured %v ok %v; want the seed", s, measured, ok)
		}
		if ch, ok := DefaultConfig().Choose(tab.For(alice, now), "resnet50", []string{"bert"}); !ok || ch.Unmeasured {
			t.Fatalf("another user's guest is not chosen by its seed: %+v %v", ch, ok)
		}
	})
	t.Run("one user beside many victims counts once", func(t *testing.T) {
		tab := NewTable(Limits{Quorum: 2, MarkTTL: ttl})
		for _, victim := range []string{"1", "2", "3"} {
			tab.LearnBy(Party{Host: "666", Guest: victim}, now, "resnet50", "bert", revert, 0.5, math.NaN())
		}
		if tab.For(alice, now).Bad("resnet50", "bert") {
			t.Fatal("marks that all share one user reached a quorum")
		}
		tab.LearnBy(Party{Host: "7", Guest: "8"}, now, "resnet50", "bert", revert, 0.5, math.NaN())
		if !tab.For(alice, now).Bad("resnet50", "bert") {
			t.Fatal("two independent parties' marks do not apply to everyone")
		}
	})
	t.Run("fractions are clamped and a quorum's figure is their median", func(t *testing.T) {
		tab := NewTable(Limits{Quorum: 3, MarkTTL: ttl})
		tab.LearnBy(mallory, now, "resnet50", "bert", keep, 5, 1.2)
		if s, _, _ := tab.For(mallory, now).Lookup("resnet50", "bert"); s.Of != 1 || s.Beside != 1 {
			t.Fatalf("stored %+v; want clamped to 1", s)
		}
		if _, _, ok := tab.For(alice, now).Lookup("resnet50", "bert"); ok {
			t.Fatal("one party's fractions reach another user")
		}
		tab.LearnBy(Party{Host: "1", Guest: "2"}, now, "resnet50", "bert", keep, 0.9, 0.6)
		tab.LearnBy(Party{Host: "3", Guest: "3"}, now, "resnet50", "bert", keep, 0.8, 0.5)
		s, measured, ok := tab.For(alice, now).Lookup("bert", "resnet50")
		if !ok || !measured || s.Of != 0.6 || s.Beside != 0.9 {
			t.Fatalf("with a quorum another user sees %+v measured %v; want the median {0.6 0.9}", s, measured)
		}
	})
	t.Run("every mark expires", func(t *testing.T) {
		tab := NewTable(Limits{Quorum: 1, MarkTTL: ttl})
		tab.LearnBy(mallory, now, "resnet50", "bert", revert, 0.5, math.NaN())
		if !tab.For(alice, now+ttl-1).Bad("resnet50", "bert") {
			t.Fatal("the mark does not hold before its TTL (quorum 1)")
		}
		if tab.For(mallory, now+ttl).Bad("resnet50", "bert") || tab.For(alice, now+ttl).Bad("resnet50", "bert") {
			t.Fatal("the mark outlived its TTL")
		}
		if marked, _ := tab.LearnBy(mallory, now+ttl, "resnet50", "bert", revert, 0.5, math.NaN()); !marked {
			t.Fatal("an expired pair is not marked again")
		}
	})
	t.Run("a host's and guest's roles count", func(t *testing.T) {
		tab := NewTable(Limits{Quorum: 2, MarkTTL: ttl})
		tab.LearnBy(Party{Host: "1", Guest: "2"}, now, "resnet50", "bert", revert, 0.5, math.NaN())
		if !tab.For(Party{Host: "2", Guest: "1"}, now).Bad("bert", "resnet50") {
			t.Fatal("the pair named the other way round does not meet the mark")
		}
		if tab.For(Party{Host: "2", Guest: "1"}, now).Bad("resnet50", "bert") {
			t.Fatal("the users' roles swapped meet the mark")
		}
	})
}
