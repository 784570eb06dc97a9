package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// A pass's first stage, account: every snapshot folded into its job's
// ledger record (priority.Account's rules), its account charged, the jobs
// to rank collected. The helpers only this stage calls follow account in
// the order it calls them.

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

// finishedEarlier says s is a job an earlier pass (or the core before a
// restart) already saw finish. A job with a record again (slurmctld can
// requeue a finished batch job) is observed as any other.
func (c *Core) finishedEarlier(s *Snapshot) bool {
	if s.State != StateFinished {
		return false
	}
	_, done := c.finished[s.ID]
	_, active := c.records[s.ID]
	return done && !active
}

// restoreFromMarker, the first time a pass sees a job after start, takes
// the job's record from the marker Slurm saved with it when that shows
// more closed service than the ledger has: the ledger lost writes. Caller
// holds mu, before observe.
func (c *Core) restoreFromMarker(s *Snapshot) {
	c.marks.init()
	if c.marks.checked[s.ID] {
		return
	}
	c.marks.checked[s.ID] = true
	if s.Marker == "" || s.State == StateFinished {
		return
	}
	m, err := parseMarker(s.Marker)
	if err != nil {
		c.log.Warn("ignoring the job's Lachesis marker", keyJob, s.ID, keyErr, err)
		return
	}
	rec := c.records[s.ID]
	if rec != nil && rec.Upgraded == 0 && m.upgraded != 0 {
		// The ledger lost the upgrade: the job stays guaranteed.
		rec.Upgraded = m.upgraded
		c.markDirty(rec)
		c.log.Warn("restored the job's upgrade to guaranteed from its saved SystemComment; the ledger had lost it", keyJob, s.ID)
	}
	if rec != nil && rec.ServiceClosed >= m.closed {
		return
	}
	had := 0.0
	if rec == nil {
		rec = &ledger.Record{JobID: s.ID, Account: priority.NewAccount(s.SubmitTime)}
		c.records[s.ID] = rec
	} else {
		had = rec.ServiceClosed
	}
	rec.ServiceClosed, rec.ServiceBase, rec.LastRun = m.closed, m.base, m.lastRun
	rec.Queue, rec.Runs, rec.Promotions = m.queue, m.runs, m.promos
	rec.Upgraded = max(rec.Upgraded, m.upgraded)
	if m.firstSubmit != 0 {
		rec.FirstSubmit = m.firstSubmit
	}
	if rec.RunStart != m.runStart {
		// The open run the marker knew (none when its start is 0: Slurm
		// never starts a job at time 0); observe goes on from Slurm's view.
		rec.RunOpen = m.runStart != 0
		rec.RunStart, rec.RunGPUs, rec.RunSeconds = m.runStart, m.runGPUs, 0
	}
	c.markDirty(rec)
	c.log.Warn("restored attained service from the job's saved SystemComment; the ledger had lost writes",
		keyJob, s.ID, keyService, rec.Total(), keyLedger, had, keyQueue, rec.Queue)
}

// parseMarker reads a marker written by String; anything else is an error
// (an admin's text that merely looks like one must not become service).
func parseMarker(s string) (marker, error) {
	var m marker
	body, ok := strings.CutPrefix(s, MarkerPrefix)
	if !ok {
		return m, fmt.Errorf("%w: no prefix", ErrMarker)
	}
	var seen int
	for _, kv := range strings.Fields(body) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return m, fmt.Errorf("%w: %q", ErrMarker, kv)
		}
		var err error
		switch k {
		case "sc":
			m.closed, err = strconv.ParseFloat(v, 64)
		case "sb":
			m.base, err = strconv.ParseFloat(v, 64)
		case "lr":
			m.lastRun, err = strconv.ParseFloat(v, 64)
		case "q":
			m.queue, err = strconv.Atoi(v)
		case "r":
			m.runs, err = strconv.Atoi(v)
		case "p":
			m.promos, err = strconv.Atoi(v)
		case "fs":
			m.firstSubmit, err = strconv.ParseInt(v, 10, 64)
		case "rs":
			m.runStart, err = strconv.ParseInt(v, 10, 64)
		case "rg":
			var g uint64
			g, err = strconv.ParseUint(v, 10, 32)
			m.runGPUs = uint32(g)
		case "up":
			m.upgraded, err = strconv.ParseInt(v, 10, 64)
			if err == nil && m.upgraded < 0 {
				err = errors.New("negative")
			}
			seen-- // optional: not one of the nine every marker has
		default:
			continue // a later version's field
		}
		if err != nil {
			return m, fmt.Errorf("%w: %s: %v", ErrMarker, k, err)
		}
		seen++
	}
	if seen < 9 || !finiteNonNegative(m.closed, m.base, m.lastRun) || m.queue < 0 || m.runs < 0 || m.promos < 0 {
		return m, fmt.Errorf("%w: incomplete or negative: %q", ErrMarker, s)
	}
	return m, nil
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

// reopen continues the record of a job that finished and is active again:
// slurmctld requeues a finished batch job on `scontrol requeue` (its owner
// may ask, within MinJobAge). Its service, runs and queue carry on, as a
// preempted job's do; else the requeue would reset its owner's service to
// zero. Its end stays in the completed-job history.
func (c *Core) reopen(now int64, old *ledger.Record) *ledger.Record {
	rec := *old
	rec.Finished = 0
	rec.WaitingSince = now
	rec.LastRunStart, rec.LastRunGPUs, rec.LastRunSpeed = 0, 0, 0
	// It joins its sweep again as an active member (joinSweep).
	rec.Sweep, rec.InSweep, rec.SweepSample = priority.SiblingKey{}, false, false
	c.records[rec.JobID] = &rec
	delete(c.finished, rec.JobID)
	c.markDirty(&rec)
	c.log.Info("finished job requeued: its ledger record continues", keyJob, rec.JobID, keyService, rec.Total(),
		keyQueue, rec.Queue)
	return &rec
}

// markDirty queues a copy of rec for the writer. Caller holds mu.
func (c *Core) markDirty(rec *ledger.Record) {
	c.pendMu.Lock()
	c.pending[rec.JobID] = *rec
	c.pendMu.Unlock()
}

// charge adds GPU-seconds of attained service to an account.
func (f *fairShareState) charge(account string, gpuSeconds float64) {
	f.table.Charge(account, gpuSeconds)
}

// closeRequeuedRun ends the open run of a job a pass finds pending again,
// or running a run that began since (requeued and restarted between two
// passes). A preemption ends it when Slurm preempted it and counts as one (the
// victim order and max_per_job count those alone); any other requeue (the
// owner's `scontrol requeue`, a node failure) ends it when Slurm says and
// is only a new run. Either way the run is charged to its true end, not
// to the last pass that saw it running. Called under c.mu.
func (c *Core) closeRequeuedRun(now int64, s *Snapshot, rec *ledger.Record) {
	ev, preempted := c.preemptionOf(s, rec)
	if !preempted {
		end := requeueEnd(now, s, rec)
		rec.RunSeconds = float64(end - rec.RunStart)
		c.log.Info("job requeued, not by a Lachesis preemption", keyJob, rec.JobID, keyRequeues, rec.Requeues()+1,
			keyRan, rec.RunSeconds)
		rec.Requeued(end)
		return
	}
	end := clampEnd(ev.at, now, s, rec)
	rec.RunSeconds = float64(end - rec.RunStart)
	c.met.requeued(true)
	c.logPreempted(rec, ev, "requeued")
	rec.Preempted(end)
}

// preemptionOf returns the preemption of rec's open run, if Slurm
// preempted it: the core was told (Preempting), or the snapshot still
// carries Slurm's preempt_time (a pass that sees the requeue before it
// completes). It forgets the event.
func (c *Core) preemptionOf(s *Snapshot, rec *ledger.Record) (preemptEvent, bool) {
	ev, ok := c.preemption.events[s.ID]
	delete(c.preemption.events, s.ID)
	if !ok && s.PreemptTime != 0 {
		ev, ok = preemptEvent{at: s.PreemptTime}, true
		if n, noted := c.preemption.notes[s.ID]; noted {
			ev.note, ev.noted = n, true
		}
	}
	if !ok || !rec.RunOpen || ev.at < rec.RunStart {
		return preemptEvent{}, false
	}
	delete(c.preemption.notes, s.ID)
	return ev, true
}

// requeueEnd is when the run of rec that Slurm requeued without a
// preemption ended, as Slurm says: the end time its requeue set, which a
// pass sees while the job is still completing; failing that (the requeue
// completed, and Slurm cleared it), the run's end as last observed. Never
// before what was observed, nor after now or the start of a run that
// followed.
func requeueEnd(now int64, s *Snapshot, rec *ledger.Record) int64 {
	end := rec.RunEnd()
	if s.State == StatePending && s.EndTime > rec.RunStart {
		end = s.EndTime
	}
	return clampEnd(end, now, s, rec)
}

// clampEnd bounds end, the end of rec's open run, to [the run's end as
// last observed, now], and to the start of the run s shows if s shows a
// new one.
func clampEnd(end, now int64, s *Snapshot, rec *ledger.Record) int64 {
	last := rec.RunEnd()
	limit := now
	if s.State != StatePending && s.StartTime > rec.RunStart {
		limit = min(limit, s.StartTime)
	}
	return max(min(end, limit), last)
}

// logPreempted logs a preemption of rec's open run and keeps its reason in
// the job's ledger record; outcome says what Slurm did to the job
// ("requeued", or "killed" for a job that may not be requeued). Called
// under c.mu, before the run is closed.
func (c *Core) logPreempted(rec *ledger.Record, ev preemptEvent, outcome string) {
	n := ev.note
	n.ran = rec.RunSeconds
	rec.PreemptReason = n.reason()
	if !ev.noted { // e.g. the rule's yes was given before a restart
		n.queue = rec.Queue
		rec.PreemptReason = fmt.Sprintf("preempted by Slurm after a %.0f s run (no Lachesis decision on record)", n.ran)
	}
	c.log.Info("job preempted", keyJob, rec.JobID, keyPreemptor, n.by, keyPreemptorQueue, n.byQueue,
		keyQueue, n.queue, keyRan, n.ran, keyPreemptions, rec.Preemptions+1, keyOutcome, outcome, keyReason, rec.PreemptReason)
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

// chargedGPUs is the rate at which the job's run accrues service: its GPUs,
// or for a job without GPUs its CPUs in GPU-equivalents
// (priority.ChargedGPUs). cpusPerGPU is tiresias.cpu_job_cpus_per_gpu; 0
// takes the rate from the job's node, its CPUs per GPU, as Synergy's
// proportional share does. On a node without GPUs and with no configured
// rate the job is charged the minimum, 1.
func (s *Snapshot) chargedGPUs(cpusPerGPU uint32) uint32 {
	gpus := s.gpuCount()
	if gpus > 0 {
		return gpus
	}
	if cpusPerGPU == 0 && s.NodeGPUs > 0 {
		cpusPerGPU = max(s.NodeCPUs/s.NodeGPUs, 1)
	}
	return priority.ChargedGPUs(0, s.CPUs, cpusPerGPU)
}

// gpuCount resolves the job's GPU count, falling back to its request
// strings; a job on a share of a GPU counts one GPU per node (GPUShare).
func (s *Snapshot) gpuCount() uint32 {
	n := uint64(s.GPUs)
	if s.GPUs == UnknownGPUs {
		var err error
		if n, err = s.GresRequest.Total(); err != nil || n > uint64(gres.MaxCount) {
			n = 0
		}
	}
	if n == 0 && s.GPUShare {
		return min(max(s.GresRequest.Nodes, 1), gres.MaxCount)
	}
	return uint32(n)
}

// runSeconds is how long the job's current (or, once finished, last) run
// has lasted, the way squeue computes it: suspended time does not count.
func (s *Snapshot) runSeconds(now int64) float64 {
	if s.StartTime == 0 {
		return 0
	}
	end := now
	if s.State == StateFinished && s.EndTime >= s.StartTime {
		end = s.EndTime
	}
	var secs int64
	switch {
	case s.State == StateSuspended:
		secs = s.PreSusTime
	case s.SuspendTime != 0:
		secs = end - s.SuspendTime + s.PreSusTime
	default:
		secs = end - s.StartTime
	}
	return float64(max(secs, 0))
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

// trueEnd returns s with its end moved back to the end a node reported,
// when that is earlier and not before the run's start; logged when the
// job was still active (a later pass sees it again, quietly). Caller holds
// mu.
func (c *Core) trueEnd(s *Snapshot, active bool) *Snapshot {
	end, ok := c.ends.held[s.ID]
	if !ok || end < s.StartTime || (s.EndTime != 0 && end >= s.EndTime) {
		return s
	}
	t := *s
	if active {
		c.log.Info("job's end corrected to the node's report", keyJob, s.ID, keyEnd, end, "slurm_end", s.EndTime)
	}
	t.EndTime = end
	return &t
}

// noteKilled logs a job that finished because Slurm preempted it and could
// not requeue it (--no-requeue): a preemption like any other, whose run
// ends at its kill. Called under c.mu with the finished run still open.
func (c *Core) noteKilled(s *Snapshot, rec *ledger.Record) {
	ev, preempted := c.preemptionOf(s, rec)
	if !preempted {
		return
	}
	c.logPreempted(rec, ev, "killed")
	rec.Preemptions++
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

// heirKey is what a job shares with the ended jobs it may replace.
func heirKey(s *Snapshot) priority.HeirKey {
	return priority.HeirKey{User: s.User, Account: s.Account, GPUs: s.gpuCount()}
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
