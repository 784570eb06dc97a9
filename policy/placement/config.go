package placement

import (
	"errors"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

// Config is the placement section of lachesis.yaml.
type Config struct {
	Enabled bool
	// FeaturePrefix + type is the node feature that marks nodes of a GPU
	// type (e.g. "gpu_" and type "a" give Feature=gpu_a).
	FeaturePrefix string
	// MinAdvantage: a type is left out of the preference when the model's
	// comparative advantage there is more than this factor below its best
	// type's. 1 keeps only the best type(s).
	MinAdvantage float64
	// SensitiveBelow: a model whose spread throughput, as a fraction of its
	// consolidated throughput, is below this is kept on the fewest nodes.
	SensitiveBelow float64
	// Models maps a model key (lower case) to its per-type speeds and
	// placement sensitivity.
	Models map[string]Model
	// Profiled is not read from the YAML: the core sets it per decision
	// to the profile store's per-GPU throughput of each model (lower case)
	// on each GPU type it was profiled on (read only). A model profiled
	// on two or more types takes its speeds from there instead of Models,
	// keeping the table's SpreadRatio: measured beats typed-in.
	Profiled map[string]map[string]float64
}

// model is key's row: its profiled speeds when it was profiled on two or
// more types, else the admin's table; profiled says which.
func (c *Config) model(key string) (m Model, profiled, ok bool) {
	m, ok = c.Models[key]
	if row := c.Profiled[key]; usableTypes(row) >= 2 {
		return Model{Speed: row, SpreadRatio: m.SpreadRatio}, true, true
	}
	return m, false, ok
}

// usableTypes counts a speed row's finite, positive entries.
func usableTypes(row map[string]float64) int {
	n := 0
	for _, v := range row {
		if v > 0 && !math.IsInf(v, 0) {
			n++
		}
	}
	return n
}

// Model is one row of the admin's table.
type Model struct {
	// Speed is the model's throughput on each GPU type, in any unit that is
	// the same for all of the model's types (only ratios are used).
	Speed map[string]float64
	// SpreadRatio is throughput spread over nodes / throughput on as few
	// nodes as possible, in (0, 1]; 0 means unknown (never consolidated).
	SpreadRatio float64
}

// DefaultConfig is where placement's defaults live (etc/lachesis.yaml
// documents them). Off until the admin has a table.
func DefaultConfig() Config {
	return Config{Enabled: false, FeaturePrefix: "gpu_", MinAdvantage: 1.25, SensitiveBelow: 0.8, Models: map[string]Model{}}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid placement config")

// Bounds on the table: it is read under no lock but consulted at every
// submit, and its names end up in node feature expressions.
const (
	MaxModels   = 4096
	MaxTypes    = 32
	maxNameLen  = 64
	maxSpeedVal = 1e12
)

// Slurm feature names are letters, digits, '_', '.', '-' (no operators).
var namePat = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate reports every problem in c at once; each error is a
// *configerr.KeyError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, configerr.New(ErrInvalidConfig, key, format, a...))
	}
	if c.FeaturePrefix != "" && (len(c.FeaturePrefix) > maxNameLen || !namePat.MatchString(c.FeaturePrefix)) {
		bad("feature_prefix", "must be letters, digits, '_', '.' or '-' (at most %d), got %q", maxNameLen, c.FeaturePrefix)
	}
	if !(c.MinAdvantage >= 1 && c.MinAdvantage <= 100) {
		bad("min_advantage", "must be between 1 and 100, got %v", c.MinAdvantage)
	}
	if !(c.SensitiveBelow >= 0 && c.SensitiveBelow <= 1) {
		bad("sensitive_below", "must be in [0, 1], got %v", c.SensitiveBelow)
	}
	if len(c.Models) > MaxModels {
		bad("models", "at most %d models, got %d", MaxModels, len(c.Models))
	}
	names := make([]string, 0, len(c.Models))
	for name := range c.Models {
		names = append(names, name)
	}
	sort.Strings(names) // errors in a stable order
	for _, name := range names {
		m := c.Models[name]
		key := "models." + name
		if name == "" || len(name) > 128 {
			bad(key, "model names must have 1 to 128 characters")
		}
		if len(m.Speed) > MaxTypes {
			bad(key+".speed", "at most %d GPU types, got %d", MaxTypes, len(m.Speed))
		}
		types := make([]string, 0, len(m.Speed))
		for t := range m.Speed {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			v := m.Speed[t]
			if len(t) > maxNameLen || !namePat.MatchString(t) {
				bad(key+".speed."+t, "GPU type names must be letters, digits, '_', '.' or '-' (at most %d)", maxNameLen)
			}
			if !(v > 0 && v <= maxSpeedVal) || math.IsInf(v, 0) {
				bad(key+".speed."+t, "must be a positive number, got %v", v)
			}
		}
		if !(m.SpreadRatio >= 0 && m.SpreadRatio <= 1) {
			bad(key+".spread_ratio", "must be in (0, 1], or 0 for unknown, got %v", m.SpreadRatio)
		}
	}
	return errors.Join(errs...)
}

// Normalize lower-cases model and type names (the YAML loader does so for
// map keys anyway; doing it here keeps programmatic configs consistent).
func (c Config) Normalize() Config {
	out := c
	out.Models = make(map[string]Model, len(c.Models))
	for name, m := range c.Models {
		sp := make(map[string]float64, len(m.Speed))
		for t, v := range m.Speed {
			sp[strings.ToLower(t)] = v
		}
		out.Models[strings.ToLower(name)] = Model{Speed: sp, SpreadRatio: m.SpreadRatio}
	}
	return out
}
