package priority

import (
	"errors"
	"math"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

func testSpeeds() *Speeds {
	return &Speeds{
		TypeDefault: map[string]float64{"a": 2, "b": 1, "v100": 1.5},
		Table: map[string]map[string]float64{
			"fast_on_a":  {"a": 3, "b": 1},
			"only_a":     {"a": 9},
			"no_default": {"x": 4, "y": 2},
			"anchored_v": {"a": 6, "v100": 2},
			"zero_row":   {"a": 0, "b": 1},
			"slow_on_a":  {"a": 1, "b": 2},
		},
		Profiled: map[string]map[string]float64{
			"bert":      {"a": 120, "b": 30}, // 4x: beats the table's
			"fast_on_a": {"a": 50},           // one type: no ratio
		},
	}
}

func TestSpeedLookupChain(t *testing.T) {
	cases := []struct {
		name, model, typ string
		want             float64
		src              SpeedSource
	}{
		{"untyped run counts plain GPU-seconds", "bert", "", 1, SpeedUntyped},
		{"profiled on both types: the throughput ratio at b's default", "bert", "a", 4, SpeedProfiled},
		{"profiled slow type keeps its default", "bert", "b", 1, SpeedProfiled},
		{"type names are case-insensitive", "BERT", "A", 4, SpeedProfiled},
		{"profiled on one type only falls to the table", "fast_on_a", "a", 3, SpeedTable},
		{"table ratio anchored at the slower default", "fast_on_a", "b", 1, SpeedTable},
		{"table row anchored at its lowest-default type", "anchored_v", "a", 4.5, SpeedTable},
		{"table row with one type falls to the type default", "only_a", "a", 2, SpeedTypeDefault},
		{"row without defaults is anchored at its slowest type", "no_default", "x", 2, SpeedTable},
		{"slowest type of a row without defaults is 1", "no_default", "y", 1, SpeedTable},
		{"unusable table entry falls to the type default", "zero_row", "a", 2, SpeedTypeDefault},
		{"unknown model takes the type default", "mystery", "a", 2, SpeedTypeDefault},
		{"unknown type counts 1", "mystery", "k80", 1, SpeedUnknownType},
	}
	sp := testSpeeds()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, src := sp.Speed(tc.model, tc.typ)
			if math.Abs(got-tc.want) > 1e-12 || src != tc.src {
				t.Fatalf("Speed(%q, %q) = %v from %s, want %v from %s", tc.model, tc.typ, got, src, tc.want, tc.src)
			}
		})
	}
}

func TestSpeedIsBoundedAndNilSafe(t *testing.T) {
	sp := &Speeds{Profiled: map[string]map[string]float64{"m": {"a": 1e9, "b": 1e-9}}}
	if v, _ := sp.Speed("m", "a"); v != MaxSpeed {
		t.Fatalf("absurd ratio gave %v, want the bound %v", v, float64(MaxSpeed))
	}
	var none *Speeds
	if v, src := none.Speed("m", "a"); v != 1 || src != SpeedUnknownType {
		t.Fatalf("nil Speeds gave %v from %s, want 1", v, src)
	}
}

func TestEffectiveRateWeighsGPUSecondsBySpeed(t *testing.T) {
	cases := []struct {
		name  string
		gpus  uint32
		speed float64
		want  float64
	}{
		{"unset speed is plain GPUs", 2, 0, 2},
		{"speed 2 doubles the rate", 2, 2, 4},
		{"slow type halves it", 4, 0.5, 2},
		{"no GPUs accrue nothing", 0, 3, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := EffectiveRate(tc.gpus, tc.speed); got != tc.want {
				t.Fatalf("EffectiveRate(%d, %v) = %v, want %v", tc.gpus, tc.speed, got, tc.want)
			}
		})
	}
}

func TestRunSpeedIsZeroWhenEffectiveServiceIsOff(t *testing.T) {
	c := DefaultConfig()
	if v, _ := c.RunSpeed(testSpeeds(), "bert", "a"); v != 0 {
		t.Fatalf("effective service off gave speed %v, want 0 (plain GPU-seconds)", v)
	}
	c.EffectiveService = true
	if v, src := c.RunSpeed(testSpeeds(), "bert", "a"); v != 4 || src != SpeedProfiled {
		t.Fatalf("effective service on gave %v from %s, want 4 from profiled", v, src)
	}
}

// A run's model is what its job declares: a model whose own ratio puts it
// below its GPU type's default speed (slow_on_a: 0.5 on a by its row) runs
// at the default, so a user cannot slow their service by naming it (issue
// 20 item 2); a faster one keeps its ratio, and Speed itself is unchanged.
func TestRunSpeedNeverBelowTheTypesDefault(t *testing.T) {
	c := DefaultConfig()
	c.EffectiveService = true
	sp := testSpeeds()
	if v, src := sp.Speed("slow_on_a", "a"); v != 0.5 || src != SpeedTable {
		t.Fatalf("Speed(slow_on_a, a) = %v from %s, want the row's 0.5", v, src)
	}
	cases := []struct {
		model, typ string
		want       float64
		src        SpeedSource
	}{
		{"slow_on_a", "a", 2, SpeedTypeFloor},
		{"SLOW_ON_A", "A", 2, SpeedTypeFloor},
		{"slow_on_a", "b", 1, SpeedTable},
		{"fast_on_a", "a", 3, SpeedTable},
		{"no_default", "y", 1, SpeedTable}, // no default for y: nothing to floor at
	}
	for _, tc := range cases {
		if v, src := c.RunSpeed(sp, tc.model, tc.typ); v != tc.want || src != tc.src {
			t.Errorf("RunSpeed(%s, %s) = %v from %s, want %v from %s", tc.model, tc.typ, v, src, tc.want, tc.src)
		}
	}
}

func TestAccountWeighsEachRunByItsSpeed(t *testing.T) {
	cases := []struct {
		name  string
		speed float64
		want  float64 // service after 10 s on 2 GPUs, then 5 s more after a requeue at speed 1
	}{
		{"no speed counts GPU-seconds", 0, 2*10 + 2*5},
		{"speed 2 doubles the first run only", 2, 2*2*10 + 2*5},
		{"speed one half halves it", 0.5, 0.5*2*10 + 2*5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAccount(0)
			a.ObserveRun(100, 2, 4)
			a.SetRunSpeed(tc.speed)
			a.ObserveRun(100, 2, 10)
			if open := a.Total(); open != EffectiveRate(2, tc.speed)*10 {
				t.Fatalf("open run's service %v, want %v", open, EffectiveRate(2, tc.speed)*10)
			}
			a.Requeued(110)
			a.ObserveRun(200, 2, 5) // a new run starts with no speed
			if a.RunSpeed != 0 || a.Total() != tc.want {
				t.Fatalf("total %v (run speed %v), want %v with the new run unweighted", a.Total(), a.RunSpeed, tc.want)
			}
			if a.LastRun != 10 {
				t.Fatalf("last run %v s, want 10 wall seconds", a.LastRun)
			}
		})
	}
	var closed Account
	closed.SetRunSpeed(3)
	if closed.RunSpeed != 0 {
		t.Fatal("a speed was set without an open run")
	}
}

func TestValidateTypeSpeedsNamesTheKey(t *testing.T) {
	cases := []struct {
		name string
		m    map[string]float64
		key  string
	}{
		{"zero speed is refused", map[string]float64{"a100": 0}, "a100.speed"},
		{"negative speed is refused", map[string]float64{"a100": -1}, "a100.speed"},
		{"NaN speed is refused", map[string]float64{"a100": math.NaN()}, "a100.speed"},
		{"speed above the bound is refused", map[string]float64{"a100": 5000}, "a100.speed"},
		{"type name with an operator is refused", map[string]float64{"a|b": 1}, "a|b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateTypeSpeeds(tc.m)
			var ke *configerr.KeyError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("got %v, want an error naming %s", err, tc.key)
			}
		})
	}
	if err := ValidateTypeSpeeds(map[string]float64{"a100": 2, "v100": 1}); err != nil {
		t.Fatalf("valid types refused: %v", err)
	}
}
