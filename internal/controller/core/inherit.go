package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Service across resubmission (policy/priority/inherit.go) in the core: every end
// leaves the job's queue service, keyed by its user, account and GPU count,
// for the window; a job that replaces it inherits it in the pass that first
// sees it arrive (and at placement before that): at its submission, or once
// Slurm lets it run (noteReady). The ends live in memory only: a slurmctld
// restart forgets those of the last window.

const (
	keyHeirOf  = "inherited_from_job_id"
	keyArrived = "arrived"
)

// newHeirs is the tracker for cfg, nil when inheritance is off.
func newHeirs(cfg priority.Config) *priority.Inheritance {
	if !cfg.InheritService {
		return nil
	}
	return priority.NewInheritance(cfg.SiblingWindow)
}

// resizeHeirs makes a new tracker when a reload changed the switch or the
// window; ends kept under the old one are dropped.
func (c *Core) resizeHeirs(old, now priority.Config) {
	if old.InheritService == now.InheritService && old.SiblingWindow == now.SiblingWindow {
		return
	}
	c.heirs = newHeirs(now)
}

// inherit gives rec's job the queue service of the ended job it replaces,
// if any and more than it inherited already. The service was charged to
// its account when the ended job ran, so it is not charged again.
func (c *Core) inherit(s *Snapshot, rec *ledger.Record) {
	if c.heirs == nil {
		return
	}
	b, ok := c.heirs.For(heirKey(s), s.ID, arrival(rec))
	if !ok || !(b.Service > rec.Inherited) {
		return
	}
	rec.ServiceClosed += b.Service - rec.Inherited
	rec.Inherited = b.Service
	c.markDirty(rec)
	c.log.Info("job inherits the attained service of the ended job it replaces (same user, account and GPU count)",
		keyJob, s.ID, keyHeirOf, b.JobID, keyService, b.Service, keyArrived, max(rec.Ready, rec.FirstSubmit))
}

// arrival is when rec's job arrived, as inheritance reads it.
func arrival(rec *ledger.Record) priority.Arrival {
	return priority.Arrival{Submit: rec.FirstSubmit, Ready: rec.Ready}
}

// noteReady keeps in rec when s's job could first run: Slurm's
// EligibleTime (BeginTime), which slurmctld sets once the owner's hold,
// the job's dependencies and its begin time let it run, and clears on a
// hold. Before the job's first run the record follows it, so a job held
// after it was ready and released later arrives at the release; from the
// first run on it stays, since a requeue sets a new EligibleTime that is
// no new arrival. fresh says the pass sees the job for the first time.
//
// A job array's throttle (%N) clears EligibleTime too while it holds the
// array's tasks back, and sets it as it lets one go, as a sibling ends.
// A throttle of two or more caps how many members of a sweep run at
// once: its tasks are ready since the array's submission, so they pass
// nothing to each other, as before. A throttle of one runs the tasks one
// after another, a chain: they arrive as they are let go, like copies
// chained with --dependency. A task held or given a dependency of its own
// is a record of its own, seen waiting by a pass: it arrives when let go.
func (c *Core) noteReady(now int64, s *Snapshot, rec *ledger.Record, fresh bool) {
	if s.ArrayThrottle != 0 && s.ID == s.ArrayJobID {
		c.throttles.saw(s.ArrayJobID, s.ArrayThrottle, now)
	}
	if rec.Runs > 1 || (rec.Runs == 1 && (rec.Ready != 0 || s.State == StatePending)) {
		return // past its first run's start: a requeue is no arrival
	}
	switch {
	case s.State == StatePending && s.ArrayThrottle >= 2:
		rec.Ready = rec.FirstSubmit // waits on the throttle alone
	case s.State == StatePending && (s.Held || s.Deferred || !(s.BeginTime > 0 && s.BeginTime <= now)):
		rec.Ready = 0
	case rec.Ready != 0:
		// Ready since an earlier pass: Slurm's time is no later.
	case fresh && c.throttles.sweep(s):
		rec.Ready = rec.FirstSubmit // let go by its array's throttle
	case s.BeginTime > 0 && s.BeginTime <= max(now, s.StartTime) && (s.State == StatePending || s.BeginTime <= s.StartTime):
		rec.Ready = max(s.BeginTime, rec.FirstSubmit)
	}
}

// arrayThrottles is, per job array, the throttle its pending tasks waited
// on when a pass last saw them wait on it alone, and that pass's time.
// Entries not seen again by a pass are dropped at its end, so a task let
// go between two passes is judged by the earlier one, whatever the later
// one finds first.
type arrayThrottles map[uint32]arrayThrottle

type arrayThrottle struct {
	limit uint32
	seen  int64
}

func (t arrayThrottles) saw(array, limit uint32, now int64) {
	t[array] = arrayThrottle{limit: limit, seen: now}
}

// sweep says s, a task seen for the first time and ready or running, was
// let go by its array's throttle of two or more.
func (t arrayThrottles) sweep(s *Snapshot) bool {
	if s.ArrayJobID == 0 || s.ID == s.ArrayJobID || s.Held || s.Deferred {
		return false
	}
	return t[s.ArrayJobID].limit >= 2
}

// prune drops the arrays the pass at now did not see wait on a throttle.
func (t arrayThrottles) prune(now int64) {
	for id, e := range t {
		if e.seen != now {
			delete(t, id)
		}
	}
}

// enqueueArrival is the arrival of a job slurmctld asks about between
// passes: Enqueue comes at submit, release, requeue and updates. A job the
// passes saw waiting and never able to run, and whose EligibleTime
// slurmctld has just cleared, is being released: it arrives now (the next
// pass reads the time Slurm sets). Anything else it would be is a job
// waiting on a dependency or a begin time, which cannot start before the
// next pass judges it again.
func enqueueArrival(now int64, s *Snapshot, rec *ledger.Record, known bool) priority.Arrival {
	a := arrival(rec)
	switch {
	case a.Ready != 0 || rec.Runs != 0:
	case s.BeginTime > 0 && s.BeginTime <= now:
		a.Ready = max(s.BeginTime, rec.FirstSubmit)
	case known && s.BeginTime == 0:
		a.Ready = max(now, rec.FirstSubmit)
	}
	return a
}
