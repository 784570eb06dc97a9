package sharing

import "math"

// Introspection, the one orchestration of a pass's step 1 (doc.go): each
// pair that shared a GPU since the last pass is judged on what was
// measured of it (Config.JudgePair) and the table learns the verdict
// (Table.Learn); the caller requeues the guest of a reverted pair. The
// simulator (sim/sharing.go, measuring the pair table's truth) and
// slurmctld (internal/controller/gpushare/introspect.go, measuring the node
// agents' reports) both run it, so a pair is kept or reverted, and the
// table changed, by the same rule in both.

// PairRates is what was measured of one pair on one GPU: the guaranteed
// job's (the host's) rate alone and beside its guest, and the guest's own
// alone and beside the host, in any one unit per job (iterations/s, else
// GPU utilisation). A rate not measured is NaN: often the guest's solo
// rate, when it never ran alone.
type PairRates struct {
	HostSolo, HostShared   float64
	GuestSolo, GuestShared float64
}

// Of is the host's speed beside its guest as a fraction of alone
// (HostShared / HostSolo).
func (r PairRates) Of() float64 { return r.HostShared / r.HostSolo }

// Beside is the guest's speed beside the host as a fraction of alone
// (GuestShared / GuestSolo), NaN when either is not measured.
func (r PairRates) Beside() float64 { return r.GuestShared / r.GuestSolo }

// PairVerdict is the rules' judgement of one measured pair.
type PairVerdict struct {
	// Revert: the guest must go: the host lost more than MaxSlowdown
	// (Revert) or, with both jobs measured, the pair does no more than the
	// host alone (RevertPair).
	Revert bool
	// Futile: reverted only because the pair does not gain (Gains), the
	// host being within MaxSlowdown.
	Futile bool
}

// JudgePair is Revert, and with the guest's rates measured RevertPair, on
// one pair's measured rates.
func (c Config) JudgePair(r PairRates) PairVerdict {
	v := PairVerdict{Revert: c.Revert(r.HostSolo, r.HostShared)}
	if !v.Revert && c.RevertPair(r.HostSolo, r.HostShared, r.GuestSolo, r.GuestShared) {
		v.Revert, v.Futile = true, true
	}
	return v
}

// LearnBy is what the table takes from a pair of models host and guest
// that party p's jobs ran and the rules judged at now (Gandiva's
// introspection): a reverted pair is marked bad for p, so it is not packed
// again for p's jobs; a kept one's measured fractions replace p's view of
// the pair (a seed, what a quorum agreed, or p's earlier measurement), of
// the host's and beside the guest's, each clamped to [0, 1]; a guest whose
// own fraction was not measured (beside NaN) keeps the figure p's view
// holds, and a pair with neither is left for a later measurement. A pair
// p's view holds as bad, or without both names, is left as it is. What p
// measured reaches other users' jobs only with a quorum (Table.For). It
// reports whether it marked the pair bad now, and why the table refused
// it.
func (t *Table) LearnBy(p Party, now int64, host, guest string, v PairVerdict, of, beside float64) (markedBad bool, err error) {
	view := t.For(p, now)
	if host == "" || guest == "" || view.Bad(host, guest) {
		return false, nil
	}
	if v.Revert {
		if err := t.MarkBadBy(p, now, host, guest); err != nil {
			return false, err
		}
		return true, nil
	}
	if math.IsNaN(beside) {
		s, _, ok := view.Lookup(host, guest)
		if !ok {
			return false, nil
		}
		beside = s.Beside
	}
	// Clamped before Measure's check: a measurement above MaxFraction is
	// noise at 1, not a refusal; one Measure refuses (NaN) leaves the
	// pair as it was.
	_ = t.MeasureBy(p, now, host, guest, min(of, 1), min(beside, 1))
	return false, nil
}

// Learn is LearnBy for the zero Party (the simulator's one measurer).
func (t *Table) Learn(host, guest string, v PairVerdict, of, beside float64) (markedBad bool, err error) {
	return t.LearnBy(Party{}, 0, host, guest, v, of, beside)
}
