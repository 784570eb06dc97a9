package sharing

import (
	"errors"
	"math"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"negative max_slowdown is refused", func(c *Config) { c.MaxSlowdown = -0.01 }},
		{"max_slowdown of 1 is refused", func(c *Config) { c.MaxSlowdown = 1 }},
		{"NaN max_slowdown is refused", func(c *Config) { c.MaxSlowdown = math.NaN() }},
		{"promote_after 0 is refused (unbounded starvation otherwise unchecked)", func(c *Config) { c.PromoteAfter = 0 }},
		{"infinite promote_after is refused", func(c *Config) { c.PromoteAfter = math.Inf(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
				t.Errorf("err = %v, want ErrBadConfig", err)
			}
		})
	}
}

func TestChoose(t *testing.T) {
	tab := NewTable(Limits{})
	must(t, tab.Seed("host", "gentle", 0.98, 0.6))
	must(t, tab.Seed("host", "gentler", 0.99, 0.3))
	must(t, tab.Seed("host", "heavy", 0.80, 0.9))
	must(t, tab.Seed("host", "oom", 0, 0))
	must(t, tab.Seed("host", "bad", 1, 1))
	must(t, tab.MarkBad("host", "bad"))
	must(t, tab.Seed("host", "futile", 0.995, 0.004))
	c := DefaultConfig()
	t.Run("the guest with the least predicted loss for the host wins", func(t *testing.T) {
		ch, ok := c.Choose(tab, "host", []string{"gentle", "heavy", "gentler"})
		if !ok || ch.Index != 2 || ch.Unmeasured {
			t.Errorf("choice = %+v %v, want gentler (index 2)", ch, ok)
		}
	})
	t.Run("a guest predicted above max_slowdown is never chosen", func(t *testing.T) {
		if ch, ok := c.Choose(tab, "host", []string{"heavy"}); ok {
			t.Errorf("heavy (20%% loss) chosen: %+v", ch)
		}
	})
	t.Run("a pair marked bad or one that did not run together is never chosen", func(t *testing.T) {
		if ch, ok := c.Choose(tab, "host", []string{"bad", "oom"}); ok {
			t.Errorf("chosen: %+v", ch)
		}
	})
	t.Run("a pair that does no more than the host alone is never chosen, however gentle", func(t *testing.T) {
		// futile costs the host 0.5% (the least) for 0.4% of the guest's
		// speed: 0.999 of a GPU's work where the host alone does 1.
		ch, ok := c.Choose(tab, "host", []string{"futile", "gentle"})
		if !ok || ch.Index != 1 {
			t.Errorf("choice = %+v %v, want gentle (index 1)", ch, ok)
		}
		if ch, ok := c.Choose(tab, "host", []string{"futile"}); ok {
			t.Errorf("futile chosen: %+v", ch)
		}
	})
	t.Run("an unmeasured pair is tried only when no held pair qualifies", func(t *testing.T) {
		ch, ok := c.Choose(tab, "host", []string{"new", "gentle"})
		if !ok || ch.Index != 1 {
			t.Errorf("choice = %+v, want the held pair gentle", ch)
		}
		ch, ok = c.Choose(tab, "host", []string{"heavy", "new"})
		if !ok || ch.Index != 1 || !ch.Unmeasured {
			t.Errorf("choice = %+v, want the unmeasured trial", ch)
		}
		off := c
		off.TryUnmeasured = false
		if ch, ok := off.Choose(tab, "host", []string{"new"}); ok {
			t.Errorf("unmeasured pair chosen with TryUnmeasured off: %+v", ch)
		}
	})
}

func TestRevert(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		name         string
		solo, shared float64
		want         bool
	}{
		{"a loss of 4% keeps the pair", 100, 96, false},
		{"a loss of exactly max_slowdown keeps the pair", 100, 95, false},
		{"a loss of 6% reverts it", 100, 94, true},
		{"a faster shared rate keeps it", 100, 101, false},
		{"an unusable solo rate decides nothing", 0, 50, false},
		{"a NaN measurement decides nothing", 100, math.NaN(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.Revert(tc.solo, tc.shared); got != tc.want {
				t.Errorf("Revert(%v, %v) = %v", tc.solo, tc.shared, got)
			}
		})
	}
}

// RevertPair requeues the guest when the host lost too much, or when the
// pair measured does no more than the host alone.
func TestRevertPair(t *testing.T) {
	c := DefaultConfig()
	for _, tc := range []struct {
		name           string
		hSolo, hShared float64
		gSolo, gShared float64
		want           bool
	}{
		{"host within max_slowdown, guest at half its speed: kept", 100, 97, 10, 5, false},
		{"host above max_slowdown: reverted whatever the guest does", 100, 90, 10, 10, true},
		{"host at 0.97, guest at 0.02: together less than the host alone, reverted", 100, 97, 10, 0.2, true},
		{"guest's rates unknown: only the host's loss decides", 100, 97, 0, 0, false},
		{"guest's rate NaN: only the host's loss decides", 100, 97, 10, math.NaN(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := c.RevertPair(tc.hSolo, tc.hShared, tc.gSolo, tc.gShared); got != tc.want {
				t.Errorf("RevertPair(%v, %v, %v, %v) = %v", tc.hSolo, tc.hShared, tc.gSolo, tc.gShared, got)
			}
		})
	}
	if !Gains(Speeds{Of: 0.95, Beside: 0.3}) || Gains(Speeds{Of: 0.95, Beside: 0.05}) || Gains(Speeds{Of: 0.7, Beside: 0.2}) {
		t.Error("Gains is not Of + Beside > 1")
	}
}

func TestPromoteAndVictims(t *testing.T) {
	c := DefaultConfig()
	c.PromoteAfter = 3600
	if c.Promote(3599) || !c.Promote(3600) {
		t.Error("promotion is not at promote_after")
	}
	if !c.PromoteNow(7200, 1) || !c.PromoteNow(7200, 0) || c.PromoteNow(3599, 0) {
		t.Error("PromoteNow is not promote_after reached, guaranteed jobs waiting or not")
	}
	c.StrictOpportunistic = true
	if c.PromoteNow(7200, 1) || !c.PromoteNow(7200, 0) || c.PromoteNow(3599, 0) {
		t.Error("strict: PromoteNow is not promote_after reached with no guaranteed job waiting")
	}
	for _, s := range []string{"", "guaranteed"} {
		if c, err := ParseClass(s); err != nil || c != Guaranteed {
			t.Errorf("ParseClass(%q) = %v %v", s, c, err)
		}
	}
	if _, err := ParseClass("root"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("unknown class: %v", err)
	}
}

func TestMove(t *testing.T) {
	c := DefaultConfig()
	if c.Move(DefaultMoveAfter-1) || !c.Move(DefaultMoveAfter) {
		t.Error("a guest does not move at move_after")
	}
	c.MoveAfter = 0
	if c.Move(1e9) {
		t.Error("move_after 0 moves a guest")
	}
	c.MoveAfter = -1
	if err := c.Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative move_after: %v", err)
	}
}

func TestFitsIsChoosesRuleForOnePair(t *testing.T) {
	tab := NewTable(DefaultLimits())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tab.Seed("host", "good", 0.97, 0.9))
	must(tab.Seed("host", "slow", 0.52, 0.9))
	must(tab.Seed("host", "oom", 0, 0))
	must(tab.Seed("host", "marked", 1, 1))
	must(tab.MarkBad("host", "marked"))
	c := DefaultConfig()
	for _, tc := range []struct {
		name, guest string
		try         bool
		fits        bool
		predicted   float64
	}{
		{"a pair predicted within max_slowdown fits, with its prediction", "good", true, true, 0.97},
		{"a pair predicted to cost more than max_slowdown does not fit", "slow", true, false, 0},
		{"a pair that did not run together does not fit", "oom", true, false, 0},
		{"a pair marked bad does not fit whatever the table predicts", "marked", true, false, 0},
		{"an unmeasured pair fits as a trial, without a prediction", "new", true, true, 0},
		{"an unmeasured pair does not fit without trials", "new", false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.TryUnmeasured = tc.try
			fits, p := c.Fits(tab, "HOST", tc.guest)
			if fits != tc.fits || p != tc.predicted {
				t.Fatalf("Fits = %v %v, want %v %v", fits, p, tc.fits, tc.predicted)
			}
		})
	}
}
