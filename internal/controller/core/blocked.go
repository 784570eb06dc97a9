package core

import (
	"fmt"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

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
		return fmt.Sprintf("%smay preempt job %d when its run reaches min_run (%.0f of %.0f s)", reasontext.WaitingPrefix, n.victim, n.ran, p.MinRun)
	case priority.DeniedBudget:
		return fmt.Sprintf("%sjob %d was preempted max_per_job (%d) times already", reasontext.WaitingPrefix, n.victim, n.preemptions)
	case priority.DeniedQueueGap:
		return fmt.Sprintf("%sjob %d (queue %d) is fewer than queue_gap (%d) queues below queue %d", reasontext.WaitingPrefix, n.victim, n.victimQueue, p.QueueGap, n.queue)
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
