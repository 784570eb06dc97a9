package core

import (
	"fmt"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// ReasonPrefix starts every reason the core gives Slurm for a waiting job
// (Decision.Blocked; cgo/lachesis_core.h LACHESIS_REASON_PREFIX): the
// plugin replaces or clears only a state_desc that starts with it.
const ReasonPrefix = "Lachesis: "

// A refusal is shown as the job's reason for this long after Slurm last
// asked (its schedulers try a waiting job every few seconds to a minute),
// and each rule is logged at most once per blockedLogEvery.
const (
	blockedShownFor = 120
	blockedLogEvery = 60
)

// blockedPreemptions remembers, per waiting job, the last preemption the
// rule refused it for a cost (min_run, the budget, the queue gap), so that
// the pass can show why the job waits though a victim runs below it and
// log it. Preemptable notes refusals under slurmctld's locks, so noting is
// a map write; the pass does the rest. Guarded by Core.mu.
type blockedPreemptions struct {
	byJob map[uint32]blockedNote
	// per rule (indexed by priority.Verdict): refusals since the rule was
	// last logged, the latest of them, and when it was logged.
	count  [verdicts]int
	latest [verdicts]blockedEntry
	logged [verdicts]int64
}

// verdicts bounds priority.Verdict's values.
const verdicts = 16

type blockedNote struct {
	victim             uint32
	rule               priority.Verdict
	ran                float64 // the victim's run
	preemptions        int     // the victim's preemptions
	queue, victimQueue int
	at                 int64 // the refusal
	allowedAt          int64 // the preemptor was last let preempt some job
}

type blockedEntry struct {
	preemptor uint32
	blockedNote
}

// note records that the rule refused preemptor the victim described by v
// for rule at now.
func (b *blockedPreemptions) note(preemptor, victim uint32, rule priority.Verdict, p, v priority.Candidate, now int64) {
	if b.byJob == nil {
		b.byJob = make(map[uint32]blockedNote)
	}
	e := b.byJob[preemptor]
	// Of the victims refused in one attempt, name the one closest to
	// being preemptable under min_run: the longest run.
	if !(e.at == now && e.rule == rule && rule == priority.DeniedMinRun && e.ran > v.RunSeconds) {
		e.victim, e.rule, e.ran, e.preemptions = victim, rule, v.RunSeconds, v.Preemptions
		e.queue, e.victimQueue = p.Queue, v.Queue
	}
	e.at = now
	b.byJob[preemptor] = e
	if int(rule) < verdicts {
		b.count[rule]++
		b.latest[rule] = blockedEntry{preemptor: preemptor, blockedNote: e}
	}
}

// allowed records that preemptor was let preempt some job at now: in that
// attempt it was not blocked.
func (b *blockedPreemptions) allowed(preemptor uint32, now int64) {
	if e, ok := b.byJob[preemptor]; ok {
		e.allowedAt = now
		b.byJob[preemptor] = e
	}
}

// reason is what a waiting job refused at note's refusal is shown in
// Slurm: the rule, the job it would have preempted and the numbers.
func (n blockedNote) reason(p priority.Preemption) string {
	switch n.rule {
	case priority.DeniedMinRun:
		return fmt.Sprintf("%smay preempt job %d when its run reaches min_run (%.0f of %.0f s)", ReasonPrefix, n.victim, n.ran, p.MinRun)
	case priority.DeniedBudget:
		return fmt.Sprintf("%sjob %d was preempted max_per_job (%d) times already", ReasonPrefix, n.victim, n.preemptions)
	case priority.DeniedQueueGap:
		return fmt.Sprintf("%sjob %d (queue %d) is fewer than queue_gap (%d) queues below queue %d", ReasonPrefix, n.victim, n.victimQueue, p.QueueGap, n.queue)
	}
	return ""
}

// ruleKey names a refused rule in the log by its lachesis.yaml key.
func ruleKey(v priority.Verdict) string {
	switch v {
	case priority.DeniedMinRun:
		return "min_run"
	case priority.DeniedBudget:
		return "max_per_job"
	case priority.DeniedQueueGap:
		return "queue_gap"
	}
	return v.String()
}

// showBlocked is the pass's part: every waiting job ranked by the pass
// that the rule refused lately, and not let preempt since, gets the
// refusal as its Decision.Blocked; notes of jobs that are gone, running or
// stale are dropped; and each rule that refused someone is logged, at most
// once per blockedLogEvery, naming its latest refusal. Called under c.mu
// once the pass has ranked (results[k] is jobs[k]'s).
func (c *Core) showBlocked(now int64, out []Decision) {
	b := &c.preemption.blocked
	rule := c.cfg.Tiresias.Preemption
	for id, n := range b.byJob {
		if !c.seen[id] || now-n.at > blockedShownFor {
			delete(b.byJob, id)
		}
	}
	if len(b.byJob) > 0 {
		for k := range c.jobs {
			j := &c.jobs[k]
			n, ok := b.byJob[j.ID]
			if !ok {
				continue
			}
			if j.State != priority.Pending {
				delete(b.byJob, j.ID)
				continue
			}
			if n.at > n.allowedAt {
				out[c.jobIndex[k]].Blocked = n.reason(rule)
			}
		}
	}
	c.showOpportunistic(out)
	for v := range b.count {
		if b.count[v] == 0 || now-b.logged[v] < blockedLogEvery {
			continue
		}
		e := b.latest[v]
		c.log.Info("preemption blocked", keyRule, ruleKey(priority.Verdict(v)), keyPreemptor, e.preemptor,
			keyJob, e.victim, keyRan, e.ran, keyPreemptions, e.preemptions, keyQueue, e.victimQueue,
			keyPreemptorQueue, e.queue, keyRefusals, b.count[v], keyReason, e.reason(rule))
		b.count[v], b.logged[v] = 0, now
	}
}

// showOpportunistic gives every waiting opportunistic job ranked by the
// pass, unless a refusal is shown already, the reason it waits: its class,
// when it is upgraded to guaranteed if it still waits then, and the node
// Lachesis keeps it off, if any, with why (guestReason). Called under c.mu
// from showBlocked; takes usage.mu (the exclusions', as the last pass left
// them), the order observeUsage takes them in.
func (c *Core) showOpportunistic(out []Decision) {
	after := c.cfg.Tiresias.Opportunistic.PromoteAfter
	for id := range c.oppReasons {
		if !c.seen[id] {
			delete(c.oppReasons, id)
		}
	}
	c.usage.mu.Lock()
	defer c.usage.mu.Unlock()
	for k := range c.jobs {
		j := &c.jobs[k]
		d := &out[c.jobIndex[k]]
		if j.State != priority.Pending || !c.results[k].Opportunistic || d.Blocked != "" {
			continue
		}
		d.Blocked = c.guestReason(j.ID, j.WaitingSince, after, false)
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
}

// guestReason is waiting guest id's reason (opportunisticReason, or for a
// guest Slurm holds for its exclusion just its class), and, when Lachesis
// keeps it off nodes, the first of them with why, all within
// maxGuestReason. The pass runs under slurmctld's locks: the text is kept
// while nothing it says changes (oppReasons), so a pass formats only the
// reasons that changed since the last. Caller holds mu and usage.mu.
func (c *Core) guestReason(id uint32, since int64, after float64, held bool) string {
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
		r.text = opportunisticReason(since, after)
	default:
		r.text = keptOffReason(since, after, held, node, others, why)
	}
	c.oppReasons[id] = r
	return r.text
}

// keptOff is the first node (by name) the last pass kept waiting job id
// off, how many others, and why; "" when none. Caller holds usage.mu.
func (c *Core) keptOff(id uint32) (node string, others int, why string) {
	ex := c.usage.intro.excl[id]
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
	r := ReasonPrefix + "opportunistic"
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
// for GPUs no guaranteed job wants, and, with promoteAfter > 0, becomes
// guaranteed at waitingSince + promoteAfter (slurmctld's local time, as
// Slurm prints times).
func opportunisticReason(waitingSince int64, promoteAfter float64) string {
	r := ReasonPrefix + "opportunistic: waits for GPUs no guaranteed job needs"
	if promoteAfter > 0 {
		at := time.Unix(waitingSince+int64(promoteAfter), 0).Format("2006-01-02T15:04:05")
		r += "; guaranteed from " + at + " if none waits"
	}
	return r
}
