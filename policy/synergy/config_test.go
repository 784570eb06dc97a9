package synergy

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		key  string // "" when the config is valid
	}{
		{"defaults are valid", func(*Config) {}, ""},
		{"zero tolerance and fallback are valid", func(c *Config) { c.Tolerance, c.FallbackAfter = 0, 0 }, ""},
		{"tolerance of 1 is rejected", func(c *Config) { c.Tolerance = 1 }, "tolerance"},
		{"negative tolerance is rejected", func(c *Config) { c.Tolerance = -0.1 }, "tolerance"},
		{"NaN tolerance is rejected", func(c *Config) { c.Tolerance = math.NaN() }, "tolerance"},
		{"negative fallback is rejected", func(c *Config) { c.FallbackAfter = -time.Second }, "fallback_after"},
		{"CPU and memory reserves are valid", func(c *Config) { c.CPUReservePerNode, c.MemReservePerNodeMB = 2, 4096 }, ""},
		{"negative CPU reserve is rejected", func(c *Config) { c.CPUReservePerNode = -1 }, "cpu_reserve_per_node"},
		{"CPU reserve above the cap is rejected", func(c *Config) { c.CPUReservePerNode = MaxCPUReservePerNode + 1 }, "cpu_reserve_per_node"},
		{"negative memory reserve is rejected", func(c *Config) { c.MemReservePerNodeMB = -1 }, "mem_reserve_per_node_mb"},
		{"memory reserve above the cap is rejected", func(c *Config) { c.MemReservePerNodeMB = MaxMemReservePerNodeMB + 1 }, "mem_reserve_per_node_mb"},
		{"fallback over a week is rejected", func(c *Config) { c.FallbackAfter = MaxFallbackAfter + time.Second }, "fallback_after"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.key == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ke *configerr.KeyError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ke) || ke.Key != tc.key {
				t.Fatalf("Validate() = %v, want a KeyError for %q", err, tc.key)
			}
		})
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := Config{Tolerance: 2, FallbackAfter: -time.Second}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "tolerance") || !strings.Contains(err.Error(), "fallback_after") {
		t.Fatalf("Validate() = %v, want both keys named", err)
	}
}
