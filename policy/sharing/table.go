package sharing

import (
	"cmp"
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

// Limits bound what a table accepts and how far its measurements reach.
// The node agent's measurements come from jobs, so every field is hostile
// input.
type Limits struct {
	// MaxEntries is the most pairs the table holds.
	MaxEntries int
	// MaxName is the longest model name, in bytes.
	MaxName int
	// MaxFraction is the largest speed fraction accepted. A job cannot run
	// faster beside another than alone; the headroom above 1 is for
	// measurement noise, not for gains: a measurement is stored clamped
	// to [0, 1].
	MaxFraction float64
	// Quorum is how many measurements of a pair, no user party to two of
	// them, must agree before the pair's mark (bad, or its fractions)
	// applies to every user's jobs (Party).
	Quorum int
	// MarkTTL is how long (seconds) a measurement counts after it was
	// taken; then it is forgotten and the pair is measured again.
	MarkTTL int64
}

// DefaultQuorum: three measurements without a user in common. With three,
// the median of their fractions lies between honest ones while one party
// among them lies; a bad mark needs three parties' hosts to have slowed.
const DefaultQuorum = 3

// DefaultMarkTTL is 7 days: a pair a user's jobs marked bad is tried again
// for them a week later (a pair that still hurts is reverted within a pass
// again), and nothing anyone measured stays for good.
const DefaultMarkTTL = 7 * 24 * 3600

// maxMarksPerPair bounds the parties whose measurements one pair keeps;
// the oldest goes first.
const maxMarksPerPair = 16

// DefaultLimits hold Gavel's table (7 models, 26 model/batch variants: 351
// pairs per GPU type) many times over, and names as long as the ledger's
// model keys.
func DefaultLimits() Limits {
	return Limits{MaxEntries: 16384, MaxName: 128, MaxFraction: 1.2, Quorum: DefaultQuorum, MarkTTL: DefaultMarkTTL}
}

// Speeds is what two models do when they share one GPU: each one's speed
// as a fraction of its speed alone on that GPU.
type Speeds struct {
	// Of is the fraction of the model asked about first; Beside that of
	// its neighbour.
	Of, Beside float64
}

// Party is who measured a pair: the users (Slurm uids, as decimal text)
// whose jobs were the host (the guaranteed job) and the guest. One user's
// jobs must not change another's placement (issue 34): what a party
// measured applies to jobs of the same two users in the same roles, and
// to everyone only once Limits.Quorum parties with no user in common
// agree. The zero Party is the simulator's single trusted measurer.
type Party struct{ Host, Guest string }

// users are the party's users (one when host and guest are one user's).
func (p Party) users() []string {
	if p.Host == p.Guest {
		return []string{p.Host}
	}
	return []string{p.Host, p.Guest}
}

type pairKey struct{ lo, hi string }

// mark is one party's measurement of a pair: fractions in key order (lo's,
// hi's) when measured, a bad mark, and when it was last taken.
type mark struct {
	lo, hi   float64
	measured bool
	bad      bool
	at       int64
}

// entry holds a pair's seed (fractions in key order), each party's
// measurement (parties stored in key order too: Host is the lo model's
// job's user), and the names the pair was first stored under (Models
// returns those, not the keys).
type entry struct {
	lo, hi float64
	seeded bool
	marks  map[Party]*mark
	name   [2]string
}

// Table is the pair table: model × model → Speeds, a published seed and
// what each party measured. The zero value is not usable; use NewTable. A
// Table is not safe for concurrent use: its owner (the core under its
// lock, one simulation) serialises access. Read it through For (one
// party's view at a time); the Table's own Lookup and Bad are the zero
// Party's view (the simulator's), whose marks never expire.
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
	if l.Quorum <= 0 {
		l.Quorum = d.Quorum
	}
	if l.MarkTTL <= 0 {
		l.MarkTTL = d.MarkTTL
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

// partyKey is p (host's user, guest's user for models a, b) in the
// pair's key order; a self-pair's users are sorted (which copy hosts is
// arbitrary there).
func partyKey(p Party, k pairKey, swapped bool) Party {
	if swapped || (k.lo == k.hi && p.Host > p.Guest) {
		return Party{Host: p.Guest, Guest: p.Host}
	}
	return p
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

// entryFor validates the names and fractions and returns the pair's entry
// (added when new), its key and the fractions in key order.
func (t *Table) entryFor(a, b string, fa, fb float64) (*entry, pairKey, bool, float64, float64, error) {
	for _, n := range []string{a, b} {
		if err := t.checkName(n); err != nil {
			return nil, pairKey{}, false, 0, 0, err
		}
	}
	for _, f := range []float64{fa, fb} {
		if err := t.checkFraction(f); err != nil {
			return nil, pairKey{}, false, 0, 0, err
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
			return nil, k, swapped, 0, 0, fmt.Errorf("%w: %d pairs", ErrTableFull, len(t.entries))
		}
		e = &entry{name: [2]string{a, b}}
		if swapped {
			e.name = [2]string{b, a}
		}
		t.entries[k] = e
	}
	return e, k, swapped, fa, fb, nil
}

// Seed stores a published figure for a pair (Gavel's): what every party
// sees until measurements replace it for them.
func (t *Table) Seed(a, b string, fa, fb float64) error {
	e, _, _, fa, fb, err := t.entryFor(a, b, fa, fb)
	if err != nil {
		return err
	}
	e.lo, e.hi, e.seeded = fa, fb, true
	return nil
}

// markOf is p's mark on the pair (added when new, at now), after the
// pair's expired marks are dropped; a pair holding maxMarksPerPair
// parties drops its oldest for a new one.
func (t *Table) markOf(e *entry, p Party, now int64) *mark {
	for q, m := range e.marks {
		if !t.live(m, now) {
			delete(e.marks, q)
		}
	}
	m := e.marks[p]
	if m == nil {
		if e.marks == nil {
			e.marks = map[Party]*mark{}
		}
		if len(e.marks) >= maxMarksPerPair {
			var oldest Party
			first := true
			for q, o := range e.marks {
				if first || o.at < e.marks[oldest].at || (o.at == e.marks[oldest].at && partyLess(q, oldest)) {
					oldest, first = q, false
				}
			}
			delete(e.marks, oldest)
		}
		m = &mark{}
		e.marks[p] = m
	}
	m.at = max(m.at, now)
	return m
}

// live says whether a mark taken at m.at still counts at now. The zero
// Party's marks (at 0, read at 0) always do.
func (t *Table) live(m *mark, now int64) bool { return now-m.at < t.limits.MarkTTL }

func partyLess(a, b Party) bool { return a.Host < b.Host || (a.Host == b.Host && a.Guest < b.Guest) }

// MeasureBy stores what introspection measured for a pair on p's jobs at
// now (Unix seconds): fa is a's speed beside b over a's solo speed, fb the
// other way round, each clamped to [0, 1] (a job does not run faster
// beside another than alone). It replaces p's earlier measurement and
// keeps p's bad mark: a pair that hurt once is not packed again for p's
// jobs while the mark lasts.
func (t *Table) MeasureBy(p Party, now int64, a, b string, fa, fb float64) error {
	e, k, swapped, fa, fb, err := t.entryFor(a, b, fa, fb)
	if err != nil {
		return err
	}
	m := t.markOf(e, partyKey(p, k, swapped), now)
	m.lo, m.hi, m.measured = min(fa, 1), min(fb, 1), true
	return nil
}

// Measure is MeasureBy for the zero Party (the simulator's).
func (t *Table) Measure(a, b string, fa, fb float64) error {
	return t.MeasureBy(Party{}, 0, a, b, fa, fb)
}

// MarkBadBy remembers that a pair hurt p's guaranteed job at now (Revert):
// it is not packed again for p's jobs while the mark lasts, nor for
// anyone's once Quorum parties without a user in common marked it. A pair
// the table does not hold yet is added, so the mark survives; that can
// fail only when the table is full or a name is refused.
func (t *Table) MarkBadBy(p Party, now int64, a, b string) error {
	e, k, swapped, _, _, err := t.entryFor(a, b, 0, 0)
	if err != nil {
		return err
	}
	t.markOf(e, partyKey(p, k, swapped), now).bad = true
	return nil
}

// MarkBad is MarkBadBy for the zero Party (the simulator's).
func (t *Table) MarkBad(a, b string) error { return t.MarkBadBy(Party{}, 0, a, b) }

// Marked says whether any party's measurement of the pair is held: if
// not, every party's view of it is the seed, and a caller judging many
// parties may ask once.
func (t *Table) Marked(a, b string) bool {
	k, _ := key(a, b)
	e, ok := t.entries[k]
	return ok && len(e.marks) > 0
}

// Pairs is what the rules read of a pair table: one party's view
// (Table.For), or the simulator's (*Table).
type Pairs interface {
	// Lookup is the pair's speeds with a first; ok is false for a pair
	// the view does not hold. measured says whether the figure came from
	// introspection rather than a seed.
	Lookup(a, b string) (s Speeds, measured, ok bool)
	// Bad says whether the pair is marked bad.
	Bad(a, b string) bool
}

// View is the table as one party's jobs see it at one time: a host of
// user p.Host beside a guest of user p.Guest.
type View struct {
	t   *Table
	p   Party
	now int64
}

// For is the table as a host of p.Host's beside a guest of p.Guest's sees
// it at now (Unix seconds): their own live measurement of a pair first;
// else, when at least Quorum live measurements by parties with no user in
// common agree, theirs (bad; or the median of their fractions); else the
// seed.
func (t *Table) For(p Party, now int64) View { return View{t: t, p: p, now: now} }

// Lookup is the pair's speeds with a first as the view's party sees them.
func (v View) Lookup(a, b string) (Speeds, bool, bool) {
	s, measured, _, ok := v.resolve(a, b)
	return s, measured, ok
}

// Bad says whether the pair is bad for the view's party.
func (v View) Bad(a, b string) bool {
	_, _, bad, _ := v.resolve(a, b)
	return bad
}

// resolve is the pair's figure and bad mark for the view's party.
func (v View) resolve(a, b string) (s Speeds, measured, bad, ok bool) {
	k, swapped := key(a, b)
	e, held := v.t.entries[k]
	if !held {
		return Speeds{}, false, false, false
	}
	lo, hi, measured, bad, ok := v.t.resolveEntry(e, partyKey(v.p, k, swapped), v.now)
	if swapped {
		lo, hi = hi, lo
	}
	return Speeds{Of: lo, Beside: hi}, measured, bad, ok
}

func (t *Table) resolveEntry(e *entry, p Party, now int64) (lo, hi float64, measured, bad, ok bool) {
	own := e.marks[p]
	if own != nil && !t.live(own, now) {
		own = nil
	}
	if own != nil {
		bad = own.bad
		if own.measured {
			return own.lo, own.hi, true, bad, true
		}
	}
	var live []Party
	for q, m := range e.marks {
		if t.live(m, now) {
			live = append(live, q)
		}
	}
	// Oldest first (then by party), so which independent set is counted
	// does not change by chance.
	slices.SortFunc(live, func(a, b Party) int {
		if c := cmp.Compare(e.marks[a].at, e.marks[b].at); c != 0 {
			return c
		}
		if partyLess(a, b) {
			return -1
		}
		return 1
	})
	if !bad {
		bad = len(independent(live, func(q Party) bool { return e.marks[q].bad })) >= t.limits.Quorum
	}
	if agree := independent(live, func(q Party) bool { return e.marks[q].measured && !e.marks[q].bad }); len(agree) >= t.limits.Quorum {
		los, his := make([]float64, len(agree)), make([]float64, len(agree))
		for i, q := range agree {
			los[i], his[i] = e.marks[q].lo, e.marks[q].hi
		}
		return median(los), median(his), true, bad, true
	}
	switch {
	case e.seeded:
		return e.lo, e.hi, false, bad, true
	case bad:
		return 0, 0, true, true, true // never run together as far as this party knows
	}
	return 0, 0, false, false, false
}

// independent is the parties (in order) that pass keep, taken greedily so
// that no user is party to two of them: one user's jobs, whatever they
// report beside whomever, count once.
func independent(parties []Party, keep func(Party) bool) []Party {
	var out []Party
	used := map[string]bool{}
	for _, q := range parties {
		if !keep(q) {
			continue
		}
		us := q.users()
		if slices.ContainsFunc(us, func(u string) bool { return used[u] }) {
			continue
		}
		for _, u := range us {
			used[u] = true
		}
		out = append(out, q)
	}
	return out
}

// median of v (not empty; sorted in place): the middle value, or the mean
// of the two middle ones.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Lookup is the pair's speeds with a first as the zero Party (the
// simulator) sees them; ok is false for a pair the table does not hold.
func (t *Table) Lookup(a, b string) (s Speeds, measured, ok bool) {
	return t.For(Party{}, 0).Lookup(a, b)
}

// Bad says whether the pair is bad for the zero Party (the simulator).
func (t *Table) Bad(a, b string) bool { return t.For(Party{}, 0).Bad(a, b) }

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
		v.marks = make(map[Party]*mark, len(e.marks))
		for q, m := range e.marks {
			mc := *m
			v.marks[q] = &mc
		}
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
