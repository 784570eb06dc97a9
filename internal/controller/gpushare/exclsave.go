package gpushare

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// Exclusions across a slurmctld restart (exclude.go says why): each job's
// is saved by the writer goroutine when it changed, and restored at start.

// maxHoldWhy bounds a restored hold's reason (the ones Lachesis writes
// are under 300 bytes).
const maxHoldWhy = 1024

// restoredWhy is the reason logged for a node Lachesis added before the
// restart whose reason was not saved: it is lifted at the first pass.
const restoredWhy = "kept off by Lachesis before slurmctld restarted (reason not saved)"

// saveExclusion marks job id's exclusion for the writer. Bounded: past
// 2*maxExclusions marks the rest wait for a later change (a row left
// behind is checked at the next start). Caller holds mu.
func (in *introState) saveExclusion(id uint32) {
	if len(in.exclChanged) < 2*maxExclusions {
		in.exclChanged[id] = true
	}
}

// row is ex as the ledger keeps it: holds are its pins, then the nodes the
// pass judged (Until 0) that no pin holds. Caller holds mu.
func (ex *exclusion) row(id uint32) ledger.Exclusion {
	r := ledger.Exclusion{JobID: id, UserRaw: ex.userRaw, UserSet: slices.Clone(ex.userSet), Ours: slices.Clone(ex.ours), Applied: ex.applied}
	for node, p := range ex.pins {
		r.Holds = append(r.Holds, ledger.ExclusionHold{Node: node, Host: p.host, Until: p.until, Why: p.why})
	}
	for node, host := range ex.judged {
		why, wanted := ex.want[node]
		if _, pinned := ex.pins[node]; pinned || !wanted {
			continue
		}
		r.Holds = append(r.Holds, ledger.ExclusionHold{Node: node, Host: host, Why: why})
	}
	return r
}

// flushExclusions saves the exclusions changed since the last flush and
// drops the forgotten ones; a failed save keeps them for the next.
// Writer goroutine only: mu is held only to copy.
func (c *Sharing) flushExclusions(store ledger.ExclusionStore) {
	c.mu.Lock()
	in := &c.intro
	if len(in.exclChanged) == 0 {
		c.mu.Unlock()
		return
	}
	var save []ledger.Exclusion
	var drop []uint32
	for id := range in.exclChanged {
		if ex := in.excl[id]; ex != nil {
			save = append(save, ex.row(id))
		} else {
			drop = append(drop, id)
		}
	}
	clear(in.exclChanged)
	c.mu.Unlock()
	if err := store.SaveExclusions(save, drop); err != nil {
		c.log.Error("saving exclusions failed; retrying with the next flush", keyErr, err, keyJobs, len(save)+len(drop))
		c.mu.Lock()
		for _, r := range save {
			in.saveExclusion(r.JobID)
		}
		for _, id := range drop {
			in.saveExclusion(id)
		}
		c.mu.Unlock()
	}
}

// SaveAllExclusions marks every exclusion for the writer (a new ledger
// file has none of them).
func (c *Sharing) SaveAllExclusions() {
	c.mu.Lock()
	for id := range c.intro.excl {
		c.intro.saveExclusion(id)
	}
	c.mu.Unlock()
}

// restoreExclusions takes back the exclusions the ledger kept. The ledger
// is a file: every row is checked, and one refused is logged, skipped and
// dropped; a failed read is logged (nothing is restored). See exclude.go
// for what the first passes then do.
func (c *Sharing) restoreExclusions(store ledger.ExclusionStore, now int64) {
	rows, err := store.Exclusions()
	if err != nil {
		c.log.Error("exclusions not restored: the ledger could not be read; nodes Lachesis added before the restart stay in those jobs' ExcNodeList", keyErr, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	in := &c.intro
	n := 0
	for _, r := range rows {
		ex, err := restoredExclusion(r, now)
		if err != nil {
			c.log.Warn("exclusion in the ledger refused; skipped", keyJob, r.JobID, keyErr, err)
			in.saveExclusion(r.JobID) // not in excl: dropped by the next flush
			continue
		}
		if len(in.excl) >= maxExclusions {
			break
		}
		in.excl[r.JobID] = ex
		n++
	}
	if n > 0 {
		c.log.Info("exclusions restored from the ledger", keyJobs, n)
	}
}

// restoredExclusion is row r as the pass keeps it, or why it is refused.
// A judged node becomes a pin for occupancyFresh from now: held while its
// host runs, until the agents' reports judge it again. sent is what Slurm
// holds when the saved nodes are exactly what was applied, and stale (sent
// again by the next pass) otherwise.
func restoredExclusion(r ledger.Exclusion, now int64) (*exclusion, error) {
	switch {
	case r.Oversize:
		return nil, fmt.Errorf("its lists are over %d bytes", ledger.MaxExclusionText)
	case !hostListText(r.UserRaw):
		return nil, fmt.Errorf("the user's list %.64q is not a Slurm host list of at most %d bytes", r.UserRaw, maxExcludedList)
	case len(r.UserSet) > maxListNodes || !slices.IsSortedFunc(r.UserSet, strings.Compare) || !allNodeNames(r.UserSet):
		return nil, fmt.Errorf("the user's %d nodes are not at most %d sorted node names", len(r.UserSet), maxListNodes)
	case len(r.Ours) > ledger.MaxExclusionHolds || !allNodeNames(r.Ours):
		return nil, fmt.Errorf("Lachesis's %d nodes are not at most %d node names", len(r.Ours), ledger.MaxExclusionHolds)
	case r.UserRaw == "" && len(r.UserSet) > 0:
		return nil, fmt.Errorf("the user's nodes have no list")
	}
	ex := &exclusion{pins: map[string]pin{}, want: map[string]string{}, judged: map[string]uint32{},
		userRaw: r.UserRaw, userSet: r.UserSet, ours: r.Ours, applied: r.Applied}
	for _, h := range r.Holds {
		if !slurmNodeName(h.Node) || h.Host == 0 || h.Until < 0 || len(h.Why) > maxHoldWhy || !utf8.ValidString(h.Why) {
			return nil, fmt.Errorf("a hold on node %.64q (host %d, until %d, reason of %d bytes) is not valid", h.Node, h.Host, h.Until, len(h.Why))
		}
		until := h.Until
		if until == 0 {
			until = now + occupancyFresh
			ex.judged[h.Node] = h.Host
		}
		ex.pins[h.Node] = pin{host: h.Host, until: until, why: h.Why}
		ex.want[h.Node] = h.Why
	}
	for _, node := range r.Ours {
		if _, ok := ex.want[node]; !ok {
			ex.want[node] = restoredWhy
		}
	}
	ex.sent = staleSent
	var held []string // the nodes the saved reasons keep it off, less the user's
	for node := range ex.want {
		if !slices.Contains(r.UserSet, node) {
			held = append(held, node)
		}
	}
	if r.Applied && sameNames(held, r.Ours) {
		ex.sent = sortedNodes(ex.want)
	}
	return ex, nil
}

// hostListText says whether s may be a Slurm host list as squeue prints
// one: node-name characters, commas and ranges, within maxExcludedList.
func hostListText(s string) bool {
	if len(s) > maxExcludedList {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,[]", r)) {
			return false
		}
	}
	return true
}

func allNodeNames(names []string) bool {
	for _, n := range names {
		if !slurmNodeName(n) {
			return false
		}
	}
	return true
}

// sameNames says whether a and b hold the same names (any order).
func sameNames(a, b []string) bool {
	return len(a) == len(b) && len(without(a, b)) == 0 && len(without(b, a)) == 0
}
