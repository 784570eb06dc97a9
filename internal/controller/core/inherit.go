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

// heirKey is what a job shares with the ended jobs it may replace.
func heirKey(s *Snapshot) priority.HeirKey {
	return priority.HeirKey{User: s.User, Account: s.Account, GPUs: s.gpuCount()}
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
// hold. Until the job's first run the record follows it, so a job held
// after it was ready and released later arrives at the release; from the
// first run on it stays, since a requeue sets a new EligibleTime that is
// no new arrival.
func noteReady(now int64, s *Snapshot, rec *ledger.Record) {
	switch {
	case s.State == StatePending && rec.Runs == 0:
		rec.Ready = 0
		if !s.Held && s.BeginTime > 0 && s.BeginTime <= now {
			rec.Ready = max(s.BeginTime, rec.FirstSubmit)
		}
	case s.State != StatePending && rec.Runs == 1 && rec.Ready == 0:
		// First seen running (it started between passes), or after a
		// restart, which does not keep Ready.
		if s.BeginTime > 0 && s.BeginTime <= s.StartTime {
			rec.Ready = max(s.BeginTime, rec.FirstSubmit)
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
