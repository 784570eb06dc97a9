package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Service across resubmission (policy/priority/inherit.go) in the core: every end
// leaves the job's queue service, keyed by its user, account and GPU count,
// for the window; a job that replaces it inherits it in the pass that first
// sees it (and at placement before that). The ends live in memory only: a
// slurmctld restart forgets those of the last window.

const keyHeirOf = "inherited_from_job_id"

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
	b, ok := c.heirs.For(heirKey(s), s.ID, rec.FirstSubmit)
	if !ok || !(b.Service > rec.Inherited) {
		return
	}
	rec.ServiceClosed += b.Service - rec.Inherited
	rec.Inherited = b.Service
	c.markDirty(rec)
	c.log.Info("job inherits the attained service of the ended job it replaces (same user, account and GPU count)",
		keyJob, s.ID, keyHeirOf, b.JobID, keyService, b.Service)
}
