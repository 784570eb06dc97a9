package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A pass's first stage, account: every snapshot folded into its job's
// ledger record (priority.Account's rules), its account charged, the jobs
// to rank collected.

// account is a pass's first stage: fair-share usage decays to now, every
// snapshot updates its job's record (and charges its account); the jobs to
// rank (not finished, not held) are collected in c.jobs with their
// snapshot's index in c.jobIndex, and pending jobs that Synergy enlarged
// are noted as fallback candidates.
func (c *Core) account(now int64, snaps []Snapshot, out []Decision) {
	c.fs.decay(now, c.cfg.Tiresias.FairShare.HalfLife)
	c.sizing.candidates = c.sizing.candidates[:0]
	clear(c.seen)
	c.jobs, c.jobIndex = c.jobs[:0], c.jobIndex[:0]
	for i := range snaps {
		s := &snaps[i]
		out[i] = Decision{}
		c.seen[s.ID] = true
		if c.finishedEarlier(s) {
			continue
		}
		// Before the marker: a task split off a job array carries the
		// marker of the array's record, from which a record is made.
		_, known := c.records[s.ID]
		c.restoreFromMarker(s)
		rec := c.observe(now, s)
		if s.State == StateFinished {
			continue
		}
		c.noteReady(now, s, rec, !known)
		c.inherit(s, rec)
		if s.Held {
			continue
		}
		if s.State == StatePending {
			c.noteCandidate(now, s)
		}
		j := policyJob(rec, s)
		j.Opportunistic = rec.Opportunistic(c.cfg.Sharing.Opportunistic(s.Partition))
		if j.Opportunistic && s.State == StatePending {
			j.Pair = c.pairScores[s.ID] // the last pass's (gpushare)
		}
		c.joinSweep(s, rec, &j)
		c.jobs = append(c.jobs, j)
		c.jobIndex = append(c.jobIndex, i)
	}
}

// observe folds one snapshot into the job's ledger record and returns it.
// What a run, a requeue and a completion do to the service is
// priority.Account's; observe only maps Slurm's states onto it.
func (c *Core) observe(now int64, s *Snapshot) *ledger.Record {
	rec, ok := c.records[s.ID]
	if old := c.finished[s.ID]; !ok && old != nil && s.State != StateFinished {
		rec = c.reopen(now, old)
	} else if !ok {
		rec = &ledger.Record{JobID: s.ID, FirstSubmit: s.SubmitTime, Account: priority.NewAccount(s.SubmitTime)}
		c.records[s.ID] = rec
		c.markDirty(rec)
	}
	before := *rec
	// Whatever this observation adds to the job's service is its account's
	// usage (a node's report of an earlier end can only lower it: no
	// refund, usage decays anyway). A finished job is observed, and
	// charged, once: later passes skip it (finishedEarlier).
	defer func() { c.fs.charge(s.Account, rec.Total()-before.Total()) }()
	switch s.State {
	case StateRunning, StateSuspended:
		if rec.RunOpen && rec.RunStart == s.StartTime {
			// Still in the run a preemption was allowed to end: Slurm
			// requeues a victim in the scheduling cycle that asked, so
			// it took another; an admin's requeue later is no preemption.
			delete(c.preemption.notes, s.ID)
		}
		if rec.RunOpen && rec.RunStart != s.StartTime { // requeued and restarted since
			c.closeRequeuedRun(now, s, rec)
		}
		rec.ObserveRun(s.StartTime, c.charged(s, rec), s.runSeconds(now))
		c.weighRun(s, rec)
	case StatePending:
		if rec.RunOpen { // it ran since the last pass: requeued
			c.closeRequeuedRun(now, s, rec)
		}
	case StateFinished:
		if s.StartTime != 0 {
			// Its last run, which may have begun and ended between two
			// passes, up to the end its node reported if that is earlier
			// (jobend.go). Finished stays Slurm's end: it keys the
			// completed-job history, which later passes that still see
			// the job must find unchanged.
			rec.ObserveRun(s.StartTime, c.charged(s, rec), c.trueEnd(s, ok).runSeconds(now))
			c.weighRun(s, rec)
			c.noteKilled(s, rec)
		}
		end := s.EndTime
		if end == 0 {
			end = now
		}
		c.finish(rec, end, s.EndState == EndCompleted, heirKey(s), true)
		c.finished[s.ID] = rec
		return rec
	}
	if *rec != before {
		c.markDirty(rec)
	}
	return rec
}

// charged is the rate (GPUs, or GPU-equivalents for a job without GPUs)
// at which s's run accrues service. The rate is fixed when a run opens
// (Account.ObserveRun keeps the open run's), so it is logged only then.
func (c *Core) charged(s *Snapshot, rec *ledger.Record) uint32 {
	g := s.chargedGPUs(c.cfg.CPUJobCPUsPerGPU)
	if s.gpuCount() == 0 && (!rec.RunOpen || rec.RunStart != s.StartTime) {
		c.log.Info("job without GPUs charged in GPU-equivalents", keyJob, s.ID, keyJobCPUs, s.CPUs, keyCharged, g)
	}
	return g
}

// weighRun fixes, under effective service, the speed of a run that has
// none yet: the speed of the GPU type it holds for its model
// (priority.Speeds). The speed then weights the whole run (the run keeps
// its GPUs) and is saved with it in the ledger, so it is looked up and
// logged once per run. Runs opened while effective service was off keep
// plain GPU-seconds to their end.
func (c *Core) weighRun(s *Snapshot, rec *ledger.Record) {
	// A job without GPUs holds no GPU type: its GPU-equivalents stay as
	// charged.
	if !c.cfg.Tiresias.EffectiveService || !rec.RunOpen || rec.RunSpeed != 0 || s.Run == nil || s.gpuCount() == 0 {
		return
	}
	typ, model := s.Run.GPUType(), s.Run.ModelKey()
	sp := c.speedBase
	if c.agents != nil {
		sp.Profiled = c.agents.Throughputs()
	}
	speed, src := c.cfg.Tiresias.RunSpeed(&sp, model, typ)
	rec.SetRunSpeed(speed)
	c.log.Info("effective service: run weighted by its GPU type's speed", keyJob, s.ID,
		keyGPUType, typ, keyModel, model, keySpeed, speed, keySource, string(src))
}

// finish records a job's end and forgets it. completed says it ran to its
// end (Slurm's COMPLETED): only then is its GPU-time a sample for its
// sweep (priority.Siblings.Done). Its queue service is left for a job that
// replaces it to inherit (inherit.go), keyed by key when known.
func (c *Core) finish(rec *ledger.Record, when int64, completed bool, key priority.HeirKey, known bool) {
	from := rec.WaitingSince // it ended waiting: heirs are submitted after it began to
	if rec.RunOpen {
		from = rec.RunStart
		rec.LastRunStart, rec.LastRunGPUs, rec.LastRunSpeed = rec.RunStart, rec.RunGPUs, rec.RunSpeed
	}
	rec.CloseRun()
	rec.Finished = max(when, 1)
	if known {
		c.heirs.Ended(key, priority.Bequest{JobID: rec.JobID, Arrived: max(rec.Ready, rec.FirstSubmit), From: from, End: rec.Finished,
			Completed: completed, Service: rec.QueueService()})
	}
	rec.SweepSample = completed
	if completed {
		c.siblings.Done(rec.JobID, rec.Total())
	} else {
		c.siblings.Leave(rec.JobID)
	}
	c.markDirty(rec)
	delete(c.records, rec.JobID)
	delete(c.decisions, rec.JobID)
}

func policyJob(rec *ledger.Record, s *Snapshot) priority.Job {
	state := priority.Pending
	if s.State != StatePending {
		state = priority.Running
	}
	j := priority.Job{
		ID:           s.ID,
		State:        state,
		GPUs:         s.gpuCount(),
		SubmitTime:   rec.FirstSubmit,
		EligibleTime: s.BeginTime,
		Partition:    s.PartFactor,
		QOS:          s.QOSFactor,
		Nice:         s.Nice,
		Held:         s.Held,
		// Only before its first run: a requeued job's wait for its new
		// begin time is no arrival, and its place in its queue is its own.
		// Nor is a wait on its array's throttle of two or more: its
		// tasks are a sweep's members (inherit.go).
		Deferred: s.Deferred && rec.Runs == 0 && s.ArrayThrottle < 2,
	}
	rec.Describe(&j)
	return j
}
