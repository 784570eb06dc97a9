package gpushare

import (
	"fmt"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
)

// showReasons is the pass's first step (Judge): every waiting
// opportunistic job the pass ranked, unless a refusal is shown already,
// gets the reason it waits: its class, when it is upgraded to guaranteed
// if it still waits then, and the node Lachesis keeps it off, if any,
// with why (guestReason); a guest Slurm holds because its exclusion
// leaves it no node (BadConstraints) gets which exclusion that is. The
// exclusions are the last pass's: this pass's are decided last. Caller
// holds mu.
func (c *Sharing) showReasons(jobs []Job) {
	after := c.cfg.Tiresias.Opportunistic.Rules.PromoteAfter
	if len(c.oppReasons) > 0 {
		c.reasonPass++
		for i := range jobs {
			if r, ok := c.oppReasons[jobs[i].ID]; ok {
				r.seen = c.reasonPass
				c.oppReasons[jobs[i].ID] = r
			}
		}
		for id, r := range c.oppReasons {
			if r.seen != c.reasonPass {
				delete(c.oppReasons, id)
			}
		}
	}
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.State != Pending:
		case !j.Held && j.Opportunistic && !j.Blocked:
			j.Reason = c.guestReason(j.ID, j.WaitingSince, after, false)
		case c.heldByItsExclusion(j):
			j.Reason = c.guestReason(j.ID, 0, 0, true)
		}
	}
}

// maxGuestReason bounds a waiting guest's reason: the bytes of
// lachesis_prio_t.blocked (cgo/lachesis_core.h) before its NUL.
const maxGuestReason = 127

// oppReason is a waiting opportunistic job's reason, made for its wait
// since since under promote_after after (or held by Slurm), and for the
// first node it was kept off, the count of the others and why.
type oppReason struct {
	since  int64
	after  float64
	held   bool
	node   string
	others int
	why    string
	text   string
	seen   uint64 // the Judge that last saw its job listed
}

// guestReason is waiting guest id's reason (opportunisticReason, or for a
// guest Slurm holds for its exclusion just its class), and, when Lachesis
// keeps it off nodes, the first of them with why, all within
// maxGuestReason. The pass runs under slurmctld's locks: the text is kept
// while nothing it says changes (oppReasons), so a pass formats only the
// reasons that changed since the last. Caller holds mu (Judge, under the core's lock).
func (c *Sharing) guestReason(id uint32, since int64, after float64, held bool) string {
	node, others, why := c.keptOff(id)
	r, ok := c.oppReasons[id]
	if ok && r.since == since && r.after == after && r.held == held && r.node == node && r.others == others && r.why == why {
		return r.text
	}
	if c.oppReasons == nil {
		c.oppReasons = make(map[uint32]oppReason)
	}
	r = oppReason{since: since, after: after, held: held, node: node, others: others, why: why}
	switch {
	case node == "" && !held:
		r.text = opportunisticReason(since, after, c.cfg.Tiresias.Opportunistic.Rules.StrictOpportunistic)
	default:
		r.text = keptOffReason(since, after, held, node, others, why)
	}
	c.oppReasons[id] = r
	return r.text
}

// keptOff is the first node (by name) the last pass kept waiting job id
// off, how many others, and why; "" when none. Caller holds mu.
func (c *Sharing) keptOff(id uint32) (node string, others int, why string) {
	ex := c.intro.excl[id]
	if ex == nil {
		return "", 0, ""
	}
	for n, w := range ex.want {
		if node == "" || n < node {
			node, why = n, w
		}
	}
	return node, max(len(ex.want)-1, 0), why
}

// keptOffReason is the reason of a guest Lachesis keeps off node (and
// others more), e.g. "Lachesis: opportunistic (guaranteed from …); kept off
// node n2 (and 1 more): beside job 12 (model resnet50) the pair is
// predicted …", cut to maxGuestReason; the whole why is in slurmctld's log.
// A guest Slurm holds is not ranked, so it has no upgrade time. The why
// names a host's model, which its owner chose: cleaned like any reason.
func keptOffReason(since int64, after float64, held bool, node string, others int, why string) string {
	r := reasontext.WaitingPrefix + "opportunistic"
	if after > 0 && !held {
		r += " (guaranteed from " + time.Unix(since+int64(after), 0).Format("2006-01-02T15:04:05") + ")"
	}
	if node != "" {
		r += "; kept off node " + node
		if others > 0 {
			r += fmt.Sprintf(" (and %d more)", others)
		}
		r += ": " + why
	}
	return reasontext.Field(r, maxGuestReason)
}

// opportunisticReason is a waiting opportunistic job's reason: it waits
// its turn by attained service and is the first to be evicted (or, with
// strict, sharing.Config.StrictOpportunistic, waits for GPUs no
// guaranteed job wants), and, with promoteAfter > 0, becomes guaranteed
// at waitingSince + promoteAfter (slurmctld's local time, as Slurm prints
// times; under strict only if no guaranteed job waits then).
func opportunisticReason(waitingSince int64, promoteAfter float64, strict bool) string {
	r := reasontext.WaitingPrefix + "opportunistic: waits its turn by attained service, evicted first"
	if strict {
		r = reasontext.WaitingPrefix + "opportunistic: waits for GPUs no guaranteed job needs"
	}
	if promoteAfter > 0 {
		at := time.Unix(waitingSince+int64(promoteAfter), 0).Format("2006-01-02T15:04:05")
		r += "; guaranteed from " + at
		if strict {
			r += " if none waits"
		}
	}
	return r
}
