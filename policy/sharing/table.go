package sharing

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ErrBadEntry is wrapped by every refusal of a pair-table entry or row.
var ErrBadEntry = errors.New("bad pair-table entry")

// ErrTableFull means the table holds Limits.MaxEntries pairs already; a new
// pair is refused (an existing one may still be updated).
var ErrTableFull = errors.New("pair table full")

// Limits bound what a table accepts. The node agent's measurements come
// from jobs, so every field is hostile input.
type Limits struct {
	// MaxEntries is the most pairs the table holds.
	MaxEntries int
	// MaxName is the longest model name, in bytes.
	MaxName int
	// MaxFraction is the largest speed fraction accepted. A job cannot run
	// faster beside another than alone; the headroom above 1 is for
	// measurement noise, not for gains.
	MaxFraction float64
}

// DefaultLimits hold Gavel's table (7 models, 26 model/batch variants: 351
// pairs per GPU type) many times over, and names as long as the ledger's
// model keys.
func DefaultLimits() Limits {
	return Limits{MaxEntries: 16384, MaxName: 128, MaxFraction: 1.2}
}

// Speeds is what two models do when they share one GPU: each one's speed
// as a fraction of its speed alone on that GPU.
type Speeds struct {
	// Of is the fraction of the model asked about first; Beside that of
	// its neighbour.
	Of, Beside float64
}

type pairKey struct{ lo, hi string }

// entry holds the fractions in key order (lo's, hi's), and the names the
// pair was first stored under (Models returns those, not the keys).
type entry struct {
	lo, hi   float64
	measured bool
	bad      bool
	name     [2]string
}

// Table is the pair table: model × model → Speeds. The zero value is not
// usable; use NewTable. A Table is not safe for concurrent use: its owner
// (the core under its lock, one simulation) serialises access.
type Table struct {
	limits  Limits
	entries map[pairKey]*entry
}

// NewTable is an empty table with the given limits; a zero field takes
// DefaultLimits' value.
func NewTable(l Limits) *Table {
	d := DefaultLimits()
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxName <= 0 {
		l.MaxName = d.MaxName
	}
	if !(l.MaxFraction > 0) {
		l.MaxFraction = d.MaxFraction
	}
	return &Table{limits: l, entries: map[pairKey]*entry{}}
}

// Len is the number of pairs held.
func (t *Table) Len() int { return len(t.entries) }

// key is the pair's map key: both names through ModelKey, in order;
// swapped says b's comes first.
func key(a, b string) (pairKey, bool) {
	a, b = ModelKey(a), ModelKey(b)
	if a <= b {
		return pairKey{a, b}, false
	}
	return pairKey{b, a}, true
}

// checkName refuses empty names, names over the limit and names with
// control characters (they end up in logs and reports).
func (t *Table) checkName(name string) error {
	if name == "" || len(name) > t.limits.MaxName {
		return fmt.Errorf("%w: model name of %d bytes (1 to %d)", ErrBadEntry, len(name), t.limits.MaxName)
	}
	if strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return fmt.Errorf("%w: model name %q has control characters", ErrBadEntry, name)
	}
	return nil
}

func (t *Table) checkFraction(f float64) error {
	if math.IsNaN(f) || f < 0 || f > t.limits.MaxFraction {
		return fmt.Errorf("%w: speed fraction %v outside [0, %v]", ErrBadEntry, f, t.limits.MaxFraction)
	}
	return nil
}

// set validates and stores one entry; a seed never replaces a measurement.
func (t *Table) set(a, b string, fa, fb float64, measured bool) error {
	for _, n := range []string{a, b} {
		if err := t.checkName(n); err != nil {
			return err
		}
	}
	for _, f := range []float64{fa, fb} {
		if err := t.checkFraction(f); err != nil {
			return err
		}
	}
	if a == b && fa != fb {
		// Two copies of one model on one GPU: which copy is "a" is
		// arbitrary, so the entry must not depend on it.
		fa = (fa + fb) / 2
		fb = fa
	}
	k, swapped := key(a, b)
	if swapped {
		fa, fb = fb, fa
	}
	e, ok := t.entries[k]
	if !ok {
		if len(t.entries) >= t.limits.MaxEntries {
			return fmt.Errorf("%w: %d pairs", ErrTableFull, len(t.entries))
		}
		e = &entry{name: [2]string{a, b}}
		if swapped {
			e.name = [2]string{b, a}
		}
		t.entries[k] = e
	} else if e.measured && !measured {
		return nil
	}
	e.lo, e.hi, e.measured = fa, fb, measured
	return nil
}

// Seed stores a published figure for a pair (Gavel's); it does not replace
// a measured entry.
func (t *Table) Seed(a, b string, fa, fb float64) error { return t.set(a, b, fa, fb, false) }

// Measure stores what introspection measured for a pair: fa is a's speed
// beside b over a's solo speed, fb the other way round. It replaces a seed
// or an earlier measurement, and keeps a bad mark: a pair that hurt once
// is not packed again.
func (t *Table) Measure(a, b string, fa, fb float64) error { return t.set(a, b, fa, fb, true) }

// Lookup is the pair's speeds with a first; ok is false for a pair the
// table does not hold. measured says whether the entry came from
// introspection rather than a seed.
func (t *Table) Lookup(a, b string) (s Speeds, measured, ok bool) {
	k, swapped := key(a, b)
	e, ok := t.entries[k]
	if !ok {
		return Speeds{}, false, false
	}
	s = Speeds{Of: e.lo, Beside: e.hi}
	if swapped {
		s = Speeds{Of: e.hi, Beside: e.lo}
	}
	return s, e.measured, true
}

// MarkBad remembers that a pair hurt its guaranteed job (Revert): it is not
// packed again. A pair the table does not hold yet is added as measured
// with fractions of 0 (never run together), so the mark survives; that can
// fail only when the table is full or a name is refused.
func (t *Table) MarkBad(a, b string) error {
	k, _ := key(a, b)
	if e, ok := t.entries[k]; ok {
		e.bad = true
		return nil
	}
	if err := t.Measure(a, b, 0, 0); err != nil {
		return err
	}
	t.entries[k].bad = true
	return nil
}

// Bad says whether the pair was marked bad.
func (t *Table) Bad(a, b string) bool {
	k, _ := key(a, b)
	e, ok := t.entries[k]
	return ok && e.bad
}

// Usage is a model's share of a GPU's time when it runs alone, derived
// from its pair with itself: two copies of a job that keeps the GPU busy a
// share u of the time both run at full speed while 2u ≤ 1 and at 1/(2u) of
// it beyond, so a self-pair fraction f < 1 gives u = 1/(2f). A fraction
// of 1 only says u ≤ ½, and ½ is returned (an upper bound, so room beside
// the model is never overstated); a fraction of 0 (the copies did not fit
// together) gives 1. ok is false when the table has no self-pair for it.
func (t *Table) Usage(model string) (u float64, ok bool) {
	s, _, ok := t.Lookup(model, model)
	if !ok {
		return 0, false
	}
	if s.Of <= 0 {
		return 1, true
	}
	return min(1, max(0.5, 1/(2*s.Of))), true
}

// Clone is an independent copy (limits, entries, bad marks): a simulation
// starts from the seeds without changing the caller's table.
func (t *Table) Clone() *Table {
	c := &Table{limits: t.limits, entries: make(map[pairKey]*entry, len(t.entries))}
	for k, e := range t.entries {
		v := *e
		c.entries[k] = &v
	}
	return c
}

// Models are the models that have a pair with themselves (so a Usage),
// by the name they were first stored under, sorted.
func (t *Table) Models() []string {
	var out []string
	for k, e := range t.entries {
		if k.lo == k.hi {
			out = append(out, e.name[0])
		}
	}
	slices.Sort(out)
	return out
}
