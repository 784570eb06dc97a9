package priority

import (
	"errors"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

// Effective service (issue 12): on a cluster with several GPU types, a
// GPU-second on a fast type does more work than one on a slow type. With
// Config.EffectiveService, a run's attained service grows at
// GPUs × speed per second, where speed is the model's speed on the GPU
// type the run holds relative to a reference GPU of speed 1, so a job on
// fast GPUs reaches the queue thresholds (and is demoted) as soon as it
// has done the same work as a job on slow ones.

// SpeedSource says which link of the lookup chain gave a speed.
type SpeedSource string

const (
	// SpeedUntyped: the run's GPUs have no type; speed 1.
	SpeedUntyped SpeedSource = "untyped"
	// SpeedProfiled: the ratio of the model's profiled throughputs on
	// this type and on another type it was profiled on.
	SpeedProfiled SpeedSource = "profiled"
	// SpeedTable: the ratio from the admin's per-model table
	// (placement.models.M.speed in lachesis.yaml).
	SpeedTable SpeedSource = "model_table"
	// SpeedTypeDefault: the admin's speed of the type for any model
	// (gpu_types.T.speed).
	SpeedTypeDefault SpeedSource = "type_default"
	// SpeedUnknownType: a type nothing above knows; speed 1.
	SpeedUnknownType SpeedSource = "unknown_type"
	// SpeedTypeFloor: the model's own ratio was below the type's default
	// speed, which a run's declared model may not lower (RunSpeed).
	SpeedTypeFloor SpeedSource = "type_default_floor"
)

// Speeds is the one answer to "how fast is model M on GPU type T". All
// maps are keyed by lower-case names and are read only: callers build a
// Speeds from their own (immutable) tables and may share it.
type Speeds struct {
	// TypeDefault is each type's speed relative to a reference GPU of
	// speed 1, for models with nothing better; it also fixes the scale
	// the model-specific ratios below are expressed in.
	TypeDefault map[string]float64
	// Table is the admin's per-model speeds by type, in any unit that is
	// the same across one model's types (only ratios are used).
	Table map[string]map[string]float64
	// Profiled is the measured throughput per GPU of each model on each
	// type its profiles were taken on (any unit, one per model).
	Profiled map[string]map[string]float64
}

// Speed is model's speed on GPU type typ relative to the reference GPU,
// and where it came from. The chain: the ratio of the model's profiled
// throughputs, when it was profiled on typ and on at least one other
// type; else the ratio from the admin's per-model table, when the model's
// row has typ and another type; else the type's default speed; else 1.
// A ratio is turned into a speed at an anchor type of the same row: the
// one with the lowest default speed (then by name), whose speed is that
// default; a row none of whose types has a default is anchored at its
// slowest type, at speed 1. The result is finite and in
// [1/MaxSpeed, MaxSpeed].
func (s *Speeds) Speed(model, typ string) (float64, SpeedSource) {
	if typ == "" {
		return 1, SpeedUntyped
	}
	typ, model = strings.ToLower(typ), strings.ToLower(model)
	if s == nil {
		return 1, SpeedUnknownType
	}
	if v, ok := s.fromRow(s.Profiled[model], typ); ok {
		return v, SpeedProfiled
	}
	if v, ok := s.fromRow(s.Table[model], typ); ok {
		return v, SpeedTable
	}
	if v, ok := s.TypeDefault[typ]; ok && usableSpeed(v) {
		return clampSpeed(v), SpeedTypeDefault
	}
	return 1, SpeedUnknownType
}

// fromRow is typ's speed from one model's row of relative speeds, when the
// row compares typ with at least one other type.
func (s *Speeds) fromRow(row map[string]float64, typ string) (float64, bool) {
	v, ok := row[typ]
	if !ok || !usableSpeed(v) {
		return 0, false
	}
	anchor, anchorDefault, found := "", 0.0, false
	others := 0
	for t, rv := range row {
		if !usableSpeed(rv) {
			continue
		}
		if t != typ {
			others++
		}
		d, ok := s.TypeDefault[t]
		if !ok || !usableSpeed(d) {
			continue
		}
		if !found || d < anchorDefault || (d == anchorDefault && t < anchor) {
			anchor, anchorDefault, found = t, d, true
		}
	}
	if others == 0 {
		return 0, false
	}
	if !found {
		// No scale from the defaults: the row's slowest type is 1.
		for t, rv := range row {
			if !usableSpeed(rv) {
				continue
			}
			if !found || rv < row[anchor] || (rv == row[anchor] && t < anchor) {
				anchor, found = t, true
			}
		}
		anchorDefault = 1
	}
	return clampSpeed(v / row[anchor] * anchorDefault), true
}

// MaxSpeed bounds a speed both ways: no GPU type is a thousand times
// faster than another, so a larger ratio is a bad profile or a typo, and
// it must not freeze a job's service or fling it to the last queue.
const MaxSpeed = 1000

func usableSpeed(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

func clampSpeed(v float64) float64 { return min(max(v, 1.0/MaxSpeed), MaxSpeed) }

// EffectiveRate is the service a run accrues per second: its GPUs times
// its speed, a speed of 0 (not set) counting as 1, so that accounts of
// runs without a speed are plain GPU-seconds. Core and simulator both
// weight service through it.
func EffectiveRate(gpus uint32, speed float64) float64 {
	if speed <= 0 {
		return float64(gpus)
	}
	return float64(gpus) * speed
}

// RunSpeed is the speed a run of model on GPUs of type typ accrues
// service at under c: 0 (plain GPU-seconds, today's rule) unless
// c.EffectiveService, else speeds.Speed, but never below the type's
// default speed. A run's model is what its job declares (its comment or
// name, chosen by its user), so a model-specific ratio may raise the
// run's speed above its type's default, never lower it: naming a model
// that is slow on one's own GPUs cannot slow one's own service and keep
// one's jobs in the first queue.
func (c Config) RunSpeed(speeds *Speeds, model, typ string) (float64, SpeedSource) {
	if !c.EffectiveService {
		return 0, ""
	}
	v, src := speeds.Speed(model, typ)
	if src != SpeedProfiled && src != SpeedTable {
		return v, src
	}
	if d, ok := speeds.TypeDefault[strings.ToLower(typ)]; ok && usableSpeed(d) && v < clampSpeed(d) {
		return clampSpeed(d), SpeedTypeFloor
	}
	return v, src
}

// typeNamePat is what a GPU type may be called: Slurm GRES type names and
// node feature names share these characters.
var typeNamePat = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// MaxGPUTypes bounds gpu_types.
const MaxGPUTypes = 64

// ValidateTypeSpeeds checks the per-type default speeds (gpu_types in
// lachesis.yaml; keys lower case). Each error is a *configerr.KeyError whose Key is
// relative to the section, e.g. "a100.speed".
func ValidateTypeSpeeds(m map[string]float64) error {
	var errs []error
	if len(m) > MaxGPUTypes {
		errs = append(errs, configerr.New(ErrInvalidConfig, "(all types)", "at most %d GPU types, got %d", MaxGPUTypes, len(m)))
	}
	names := make([]string, 0, len(m))
	for t := range m {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		v := m[t]
		if !typeNamePat.MatchString(t) {
			errs = append(errs, configerr.New(ErrInvalidConfig, t, "GPU type names are 1 to 64 of a-z, 0-9, '_', '.', '-' (as in Gres=gpu:TYPE:N)"))
		}
		if !(v >= 1.0/MaxSpeed && v <= MaxSpeed) {
			errs = append(errs, configerr.New(ErrInvalidConfig, t+".speed", "must be a number in [%g, %d] (the reference GPU is 1), got %v", 1.0/MaxSpeed, MaxSpeed, v))
		}
	}
	return errors.Join(errs...)
}
