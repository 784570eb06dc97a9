package priority

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	// The sweep's choice with real costs (docs/evaluation, section 5).
	if got := cfg.Queues(); got != 5 || cfg.Mode != ModeGittins || cfg.PromoteKnob != 0 || cfg.Preemption != DefaultPreemption() {
		t.Errorf("DefaultConfig() = %d queues, mode %s, knob %v, preemption %+v; want 5, gittins, 0, %+v",
			got, cfg.Mode, cfg.PromoteKnob, cfg.Preemption, DefaultPreemption())
	}
}

func TestValidateAcceptsEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
	}{
		{"no thresholds is one queue and valid", func(c *Config) { c.Thresholds = nil }},
		{"16 thresholds is valid", func(c *Config) { c.Thresholds = ascending(16) }},
		{"gittins mode is valid", func(c *Config) { c.Mode = ModeGittins }},
		{"all weights zero is valid", func(c *Config) { c.Weights = Weights{} }},
		{"weights summing to exactly 4e9 are valid", func(c *Config) {
			c.Weights = Weights{Tiresias: 1e9, Age: 1e9, Partition: 1e9, QOS: 1e9}
		}},
		{"positive promote knob is valid", func(c *Config) { c.PromoteKnob = 2.5 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.modify(&cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidateNamesTheBadKey(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name   string
		modify func(*Config)
		key    string
	}{
		{"empty mode is rejected as mode", func(c *Config) { c.Mode = "" }, "mode"},
		{"unknown mode is rejected as mode", func(c *Config) { c.Mode = "fifo" }, "mode"},
		{"zero threshold is rejected as thresholds", func(c *Config) { c.Thresholds = []float64{0, 10} }, "thresholds"},
		{"negative threshold is rejected as thresholds", func(c *Config) { c.Thresholds = []float64{-1} }, "thresholds"},
		{"NaN threshold is rejected as thresholds", func(c *Config) { c.Thresholds = []float64{nan} }, "thresholds"},
		{"infinite threshold is rejected as thresholds", func(c *Config) { c.Thresholds = []float64{10, inf} }, "thresholds"},
		{"equal thresholds are rejected as thresholds", func(c *Config) { c.Thresholds = []float64{10, 10} }, "thresholds"},
		{"descending thresholds are rejected as thresholds", func(c *Config) { c.Thresholds = []float64{20, 10} }, "thresholds"},
		{"17 thresholds are rejected as thresholds", func(c *Config) { c.Thresholds = ascending(17) }, "thresholds"},
		{"negative knob is rejected as promote_knob", func(c *Config) { c.PromoteKnob = -1 }, "promote_knob"},
		{"NaN knob is rejected as promote_knob", func(c *Config) { c.PromoteKnob = nan }, "promote_knob"},
		{"infinite knob is rejected as promote_knob", func(c *Config) { c.PromoteKnob = inf }, "promote_knob"},
		{"negative tiresias weight is rejected as weights.tiresias", func(c *Config) { c.Weights.Tiresias = -1 }, "weights.tiresias"},
		{"NaN age weight is rejected as weights.age", func(c *Config) { c.Weights.Age = nan }, "weights.age"},
		{"infinite partition weight is rejected as weights.partition", func(c *Config) { c.Weights.Partition = inf }, "weights.partition"},
		{"negative qos weight is rejected as weights.qos", func(c *Config) { c.Weights.QOS = -0.5 }, "weights.qos"},
		{"weights summing above 4e9 are rejected as weights", func(c *Config) {
			c.Weights = Weights{Tiresias: 3e9, Age: 1e9, QOS: 1}
		}, "weights"},
		{"zero max age is rejected as max_age", func(c *Config) { c.MaxAge = 0 }, "max_age"},
		{"negative max age is rejected as max_age", func(c *Config) { c.MaxAge = -5 }, "max_age"},
		{"NaN max age is rejected as max_age", func(c *Config) { c.MaxAge = nan }, "max_age"},
		{"infinite max age is rejected as max_age", func(c *Config) { c.MaxAge = inf }, "max_age"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.modify(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tc.key+":") {
				t.Errorf("Validate() = %q, want it to name %q", err, tc.key)
			}
		})
	}
}

func TestValidateReportsEveryBadKey(t *testing.T) {
	cfg := Config{Mode: "x", Thresholds: []float64{5, 1}, PromoteKnob: -1, MaxAge: 0}
	err := cfg.Validate()
	for _, key := range []string{"mode:", "thresholds:", "promote_knob:", "max_age:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %q, missing %q", err, key)
		}
	}
}

func TestQueueOf(t *testing.T) {
	cfg := Config{Thresholds: []float64{10, 20}}
	tests := []struct {
		name    string
		service float64
		want    int
	}{
		{"no service is Q0", 0, 0},
		{"just below the first threshold is Q0", 9.999, 0},
		{"exactly the first threshold is Q1", 10, 1},
		{"between thresholds is Q1", 15, 1},
		{"exactly the last threshold is Q2", 20, 2},
		{"far beyond the last threshold is Q2", 1e12, 2},
		{"infinite service is the last queue", math.Inf(1), 2},
		{"NaN service is Q0", math.NaN(), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := QueueOf(cfg, tc.service); got != tc.want {
				t.Errorf("QueueOf(%v) = %d, want %d", tc.service, got, tc.want)
			}
		})
	}
	if got := QueueOf(Config{}, 1e9); got != 0 {
		t.Errorf("QueueOf with no thresholds = %d, want 0", got)
	}
}

func TestRankerConfigIsACopy(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FixThresholds(cfg.Thresholds)
	r, err := NewRanker(cfg, SeedDistribution())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Thresholds[0] = 1
	got := r.Config()
	if got.Thresholds[0] != 3250 {
		t.Fatalf("Ranker saw the caller's later edit: thresholds %v", got.Thresholds)
	}
	got.Thresholds[0] = 2
	if r.Config().Thresholds[0] != 3250 {
		t.Fatalf("Config() exposes the Ranker's own slice")
	}
}

func TestNewRankerRejects(t *testing.T) {
	gittins := DefaultConfig()
	gittins.Mode = ModeGittins
	if _, err := NewRanker(gittins, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("gittins mode without a distribution: err = %v, want ErrInvalidConfig", err)
	}
	bad := DefaultConfig()
	bad.MaxAge = 0
	if _, err := NewRanker(bad, SeedDistribution()); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("invalid config: err = %v, want ErrInvalidConfig", err)
	}
	las := DefaultConfig()
	las.Mode = ModeLAS
	if _, err := NewRanker(las, nil); err != nil {
		t.Errorf("las mode without a distribution: err = %v, want nil", err)
	}
}

// ascending returns n thresholds 100, 200, ...
func ascending(n int) []float64 {
	th := make([]float64, n)
	for i := range th {
		th[i] = float64(100 * (i + 1))
	}
	return th
}
