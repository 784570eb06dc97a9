package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// ErrStalled means jobs remain but nothing can ever run them; it indicates
// a bug, since every job is checked to fit the empty cluster.
var ErrStalled = errors.New("simulation stalled")

// ErrJobTooLarge means a job needs more GPUs than the cluster has.
var ErrJobTooLarge = errors.New("job larger than the cluster")

// engine is one simulation's state. Time only moves from event to event:
// arrivals (the trace, in order), completions (a heap) and passes (one
// pending request), so a run costs O(events × log) plus the passes' work,
// never O(simulated seconds).
type engine struct {
	cfg     Config
	policy  Policy
	cluster *cluster
	jobs    []JobState

	active      []*JobState // arrived and not done, in arrival order
	order       []*JobState // scratch: the pass's order
	levels      []float64
	suffix      []int
	victims     []*JobState
	heap        completions
	nextArrival int
	nextPass    float64
	// blocked: the last pass stopped at a job the main scheduler could
	// not start (Config.BackfillInterval).
	blocked    bool
	passes     uint32
	pending    int
	done       int
	unreported int

	busyGPUSeconds float64
	preemptions    int
	runs           []RunRecord

	// accts is the per-account (virtual cluster) bookkeeping for the
	// report (accounts.go).
	accts accountMeter
	// sh is the sharing state, nil without Config.Sharing (sharing.go).
	sh *shareState
}

// Run simulates trace under cfg.
func Run(cfg Config, trace *Trace) (*Result, error) {
	e, err := newEngine(cfg, trace)
	if err != nil {
		return nil, err
	}
	if err := e.loop(); err != nil {
		return nil, err
	}
	return e.result(trace), nil
}

func newEngine(cfg Config, trace *Trace) (*engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opts := cfg.PolicyOptions
	opts.clusterGPUs = cfg.Shape.GPUs()
	pol, err := NewPolicy(cfg.Policy, opts)
	if err != nil {
		return nil, err
	}
	e := &engine{
		cfg:      cfg,
		policy:   pol,
		cluster:  newCluster(cfg.Shape, cfg.Alloc, cfg.Reserve, cfg.FallbackAfter),
		jobs:     make([]JobState, len(trace.Jobs)),
		nextPass: math.Inf(1),
	}
	if pol.VictimOrder != nil {
		e.cluster.victimOrder = pol.VictimOrder
	}
	type bestCase struct {
		profile *sensitivity.Profile
		demand  sensitivity.Demand
	}
	cache := map[string]bestCase{}
	names := cfg.Profiles.Names()
	total := cfg.Shape.GPUs()
	for i := range trace.Jobs {
		job := trace.Jobs[i]
		if job.GPUs > total {
			return nil, fmt.Errorf("%w: job %d needs %d GPUs, the cluster has %d", ErrJobTooLarge, job.ID, job.GPUs, total)
		}
		if i > 0 && bySubmitJob(&trace.Jobs[i-1], &job) > 0 {
			return nil, fmt.Errorf("%w: jobs not sorted by submit time at job %d", ErrBadTrace, job.ID)
		}
		name, profile := modelFor(&job, cfg.Models, cfg.Profiles, names, cfg.Seed)
		bc, ok := cache[name]
		if !ok && profile != nil {
			d, _ := profile.BestCase(cfg.Tolerance)
			bc = bestCase{profile, d}
			cache[name] = bc
		}
		e.jobs[i] = JobState{Job: job, Model: name, Profile: bc.profile, best: bc.demand,
			acct: e.accts.index(job.Cluster)}
	}
	if cfg.Hetero != nil {
		if err := e.initHetero(); err != nil {
			return nil, err
		}
	}
	if cfg.Sharing != nil {
		if err := e.initSharing(trace); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func bySubmitJob(a, b *Job) int {
	switch {
	case a.Submit < b.Submit:
		return -1
	case a.Submit > b.Submit:
		return 1
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

func (e *engine) loop() error {
	n := len(e.jobs)
	for e.done < n {
		for len(e.heap) > 0 && e.stale(e.heap[0]) {
			e.heap.pop()
		}
		tc, ta, tp := math.Inf(1), math.Inf(1), e.nextPass
		if len(e.heap) > 0 {
			tc = e.heap[0].at
		}
		if e.nextArrival < n {
			ta = e.jobs[e.nextArrival].Job.Submit
		}
		t := min(tc, ta, tp)
		if !math.IsInf(t, 1) {
			e.accts.advance(t, e.pending > 0)
			if e.sh != nil {
				e.idle(t)
			}
		}
		switch {
		case math.IsInf(t, 1):
			return fmt.Errorf("%w at %d of %d jobs done, %d pending", ErrStalled, e.done, n, e.pending)
		case tc == t:
			for len(e.heap) > 0 && e.heap[0].at == t {
				c := e.heap.pop()
				if !e.stale(c) {
					if err := e.complete(c.job, t); err != nil {
						return err
					}
				}
			}
			e.requestPass(e.eventPassTime(t))
		case ta == t:
			for e.nextArrival < n && e.jobs[e.nextArrival].Job.Submit == t {
				e.arrive(&e.jobs[e.nextArrival])
				e.nextArrival++
			}
			e.requestPass(e.eventPassTime(t))
		default:
			e.nextPass = math.Inf(1)
			if wake := e.pass(t); !math.IsInf(wake, 1) {
				e.requestPass(e.wakeTime(wake, t))
			}
		}
	}
	if e.cfg.Progress != nil && e.unreported > 0 {
		e.cfg.Progress(e.unreported)
	}
	if e.sh != nil && e.sh.oppGPUs != 0 {
		panic(fmt.Sprintf("sim: %d GPUs still counted as held by opportunistic jobs after the last job; this is a bug in the simulator", e.sh.oppGPUs))
	}
	return nil
}

func (e *engine) stale(c completion) bool {
	return c.job.Status != Running || c.job.seq != c.seq
}

func (e *engine) requestPass(t float64) { e.nextPass = min(e.nextPass, t) }

// nextTick is the first pass tick at or after t.
func (e *engine) nextTick(t float64) float64 {
	iv := e.cfg.PassInterval
	return math.Ceil(t/iv) * iv
}

func (e *engine) eventPassTime(t float64) float64 {
	at := t
	if e.cfg.TickPassesOnly && e.cfg.PassInterval > 0 {
		at = e.nextTick(t)
	}
	if tick := e.cfg.SchedulerTick; tick > 0 {
		// The background loop's next round strictly after the event.
		at = max(at, (math.Floor(t/tick)+1)*tick)
	}
	return at
}

// wakeTime turns the time a policy change falls due into the pass that
// acts on it: the next tick, or the next whole second with no interval
// (so the integer clock the policy sees has reached it). Always after now.
func (e *engine) wakeTime(due, now float64) float64 {
	if iv := e.cfg.PassInterval; iv > 0 {
		t := e.nextTick(due)
		for t <= now {
			t += iv
		}
		return t
	}
	t := math.Ceil(due)
	if t <= now {
		t = math.Floor(now) + 1
	}
	return t
}

func (e *engine) arrive(j *JobState) {
	j.Status = Pending
	j.Remaining = j.Job.Duration
	j.Account = priority.NewAccount(int64(math.Floor(j.Job.Submit)))
	j.pendingSince = j.Job.Submit
	j.entry = j.Job.Submit
	if e.sharingOn() && j.Job.Class == sharing.Opportunistic {
		// In the policy's order like any job, or, under the strict rule,
		// outside it until promoted (sharing.go).
		j.opp = true
		e.sh.opps = append(e.sh.opps, j)
		if e.sh.cfg.Rules.StrictOpportunistic {
			return
		}
		e.active = append(e.active, j)
		return
	}
	e.active = append(e.active, j)
	e.pending++
}

func (e *engine) start(j *JobState, speed, now float64) {
	if j.host == nil {
		// A guest shares its host's GPU and takes nothing of the node.
		e.cluster.take(j)
	}
	e.accts.gpus[j.acct] += j.Job.GPUs
	j.Status = Running
	j.held = false
	if !j.opp {
		e.pending--
	}
	j.waited += now - j.pendingSince
	j.segFrom, j.allocFrom = now, now
	j.seq++
	j.RunStart, j.ProgressFrom = now, now+e.cfg.LaunchOverhead
	j.Account.StartRun(int64(math.Floor(now)), uint32(j.Job.GPUs))
	if j.Starts > 0 {
		j.ProgressFrom += e.cfg.RestartPenalty
	} else {
		j.FirstStart = now
	}
	j.Starts++
	j.Speed = speed
	// Alone unless startGuest says otherwise: a former guest restarted on
	// a GPU of its own runs at its full speed (the sharing report).
	j.shareFactor = 1
	if j.het != nil && j.het.effective {
		// Service in effective work, weighted as the core weights it.
		j.Account.SetRunSpeed(speed)
	}
	j.maxSpeed = max(j.maxSpeed, speed)
	e.heap.push(completion{at: j.ProgressFrom + j.Remaining/speed, job: j, seq: j.seq})
}

// closeRun ends j's current run at now and accounts for it.
func (e *engine) closeRun(j *JobState, now float64) {
	e.segment(j, now)
	run := now - j.RunStart
	j.progressTime += max(0, now-j.ProgressFrom)
	gpuSeconds := float64(j.Job.GPUs) * run
	j.Account.RunSeconds = j.accountSeconds(now)
	if j.host == nil {
		e.busyGPUSeconds += gpuSeconds
		if j.opp {
			e.sh.oppGPUs -= j.Job.GPUs
		}
	} else if own := j.ownGPUs(); own > 0 {
		// A guest of several GPUs holding idle ones beside its shares.
		e.busyGPUSeconds += float64(own) * run
		e.sh.oppGPUs -= own
	}
	j.heldGPUSeconds += gpuSeconds
	e.accts.gpus[j.acct] -= j.Job.GPUs
	if j.het != nil {
		e.cluster.het.account(j, j.RunStart, now)
	}
	if e.cfg.RecordRuns {
		r := RunRecord{JobID: j.Job.ID, Start: j.RunStart, End: now}
		for _, s := range j.slots {
			r.Slots = append(r.Slots, RunSlot{Node: int(s.node), GPUs: int(s.gpus), CPUs: int(s.cpus), MemGB: s.memGB})
		}
		e.runs = append(e.runs, r)
	}
	e.cluster.release(j)
}

func (e *engine) preempt(j *JobState, now float64) {
	if g := j.guest; g != nil {
		// The guest leaves with the GPU its host is preempted from; it is
		// still a guest while its run closes (it held no GPU of its own).
		e.sh.sum.HostPreempted++
		e.preempt(g, now)
		e.unpairOthers(g, j, now)
		j.guest, g.host = nil, nil
	}
	j.Remaining = j.RemainingAt(now)
	e.closeRun(j, now)
	j.Account.Preempted(int64(math.Floor(now)))
	j.Status = Pending
	j.seq++
	j.Preemptions++
	j.preemptedIn = e.passes
	j.eligibleAt = now + e.cfg.RequeueHold
	j.pendingSince = now
	if j.opp {
		// An opportunistic job's requeue is not the policy's preemption
		// (SharingSummary counts it by cause).
		return
	}
	e.preemptions++
	e.pending++
}

func (e *engine) complete(j *JobState, now float64) error {
	var node int32
	if len(j.slots) > 0 {
		node = j.slots[0].node
	}
	host := j.host
	e.closeRun(j, now)
	switch {
	case j.guest != nil && len(j.guest.coHosts) == 0 && len(j.guest.slots) == 0:
		e.hostEnded(j, node, now)
	case j.guest != nil:
		e.multiHostEnded(j, node, now)
	case host != nil:
		e.unpairOthers(j, host, now)
		e.unpair(host, j, now)
	}
	j.Account.CloseRun()
	j.Remaining = 0
	j.Status = Done
	j.Finish = now
	e.done++
	if l, ok := e.policy.Order.(interface{ jobDone(*JobState) error }); ok {
		if err := l.jobDone(j); err != nil {
			return fmt.Errorf("learning the Gittins distribution: %w", err)
		}
	}
	if e.cfg.Progress != nil {
		if e.unreported++; e.unreported >= 512 {
			e.cfg.Progress(e.unreported)
			e.unreported = 0
		}
	}
	return nil
}
