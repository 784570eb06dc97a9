package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// tiresiasOrder ranks jobs with priority.Ranker, the same code that runs
// inside slurmctld, and keeps each job's queue, queue entry, promotion and
// waiting time between passes the way the core's ledger does.
type tiresiasOrder struct {
	cfg        priority.Config
	inForce    priority.Config // cfg with the ranker's thresholds
	seed       *priority.Distribution
	ranker     *priority.Ranker
	learnEvery int
	history    []float64 // GPU-seconds of completed jobs, oldest first
	sinceLearn int

	jobs    []priority.Job
	results []priority.Result
	sorted  []*JobState

	// reference: order queues as the reference simulator's lists
	// (ReferencePreemption); nextPos numbers their entries.
	reference bool
	nextPos   int64
	index     map[*JobState]float64

	// floor is the fewest preemptions per queue among the running jobs of
	// the last pass, for the victim order (priority.PreemptionFloor).
	floor priority.PreemptionFloor
	// fair is fair share between accounts (fairshare.go), nil when off.
	fair *fairShare
	// siblings groups the trace's jobs into sweeps (a job's account is its
	// virtual cluster; traces have no user), nil when sibling prediction
	// is off.
	siblings *priority.Siblings
}

func newTiresiasOrder(name string, opts PolicyOptions) (*tiresiasOrder, error) {
	cfg := opts.Tiresias
	cfg.Thresholds = slices.Clone(cfg.Thresholds)
	cfg.Mode = priority.ModeLAS
	dist := opts.Gittins
	if name == PolicyGittins {
		cfg.Mode = priority.ModeGittins
	}
	quantiles := len(cfg.ThresholdQuantiles) > 0
	if dist == nil && (name == PolicyGittins || quantiles) {
		dist = priority.SeedDistribution()
	}
	r, err := priority.NewRanker(cfg, dist)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadConfig, name, err)
	}
	o := &tiresiasOrder{cfg: cfg, seed: dist, ranker: r, reference: opts.ReferencePreemption}
	if cfg.FairShare.Enabled {
		if o.reference {
			// The reference simulator's lists ignore every tie-break
			// fair share could act through.
			return nil, fmt.Errorf("%w: %s: fair share does not apply with reference preemption", ErrBadConfig, name)
		}
		o.fair = &fairShare{cfg: cfg.FairShare}
	}
	if name == PolicyGittins || quantiles {
		o.learnEvery = opts.LearnEvery
	}
	if name == PolicyGittins && !o.reference {
		// The reference simulator has nothing like it.
		o.siblings = priority.NewSiblings(cfg.SiblingWindow)
	}
	o.inForce = r.Config()
	return o, nil
}

func (o *tiresiasOrder) Order(now float64, jobs []*JobState, levels []float64) {
	nowSec := int64(math.Floor(now))
	o.jobs = o.jobs[:0]
	for _, j := range jobs {
		state := priority.Pending
		if j.Status == Running {
			state = priority.Running
		}
		submit := int64(math.Floor(j.Job.Submit))
		if j.Status == Running {
			// What a pass of the core observes of a running job.
			j.Account.RunSeconds = j.accountSeconds(now)
		}
		pj := priority.Job{
			ID:           j.Job.ID,
			State:        state,
			GPUs:         uint32(j.Job.GPUs),
			SubmitTime:   submit,
			EligibleTime: submit,
		}
		j.Account.Describe(&pj)
		if !j.inSweep && o.siblings != nil {
			o.siblings.Join(j.Job.ID, priority.SiblingKey{Account: j.Job.Cluster, GPUs: pj.GPUs}, submit)
			j.inSweep = true
		}
		pj.Siblings = o.siblings.Of(j.Job.ID)
		o.jobs = append(o.jobs, pj)
	}
	if o.fair != nil {
		o.fair.pass(nowSec, jobs, o.jobs)
	}
	o.siblings.Prune(nowSec)
	o.results = o.ranker.Rank(nowSec, o.jobs, o.results)
	if o.reference {
		o.referenceOrder(nowSec, jobs)
	} else {
		o.sorted = slices.Grow(o.sorted[:0], len(jobs))[:len(jobs)]
		for i := range o.results {
			res, j := &o.results[i], jobs[i]
			j.Account.Apply(nowSec, *res)
			o.sorted[res.Rank] = j
		}
		copy(jobs, o.sorted)
	}
	o.floor.Reset()
	for i, j := range jobs {
		levels[i] = float64(j.Account.Queue)
		if j.Status == Running && !j.opp { // the guaranteed jobs' reference (priority.Victim)
			o.floor.Add(j.Account.Queue, j.Account.Preemptions)
		}
	}
}

// victim describes a running job for the victim order; pos is its rank in
// the current pass.
func (j *JobState) victim() priority.Victim {
	return priority.Victim{Queue: j.Account.Queue, Preemptions: j.Account.Preemptions, Rank: int(j.pos)}
}

// referenceOrder orders jobs (o.results ranked them, in their order) the
// way the reference simulator's dlas-gpu walks its queue lists. Each queue
// is a list: a job entering the queue (arrival, demotion, promotion) joins
// its back, and after every pass the jobs left waiting move behind the
// running ones, keeping their order. So inside a queue a running job is
// never behind a waiting one, except a job demoted in this pass, which
// joins the back of its new queue. 2D-Gittins then sorts each list by
// index and submission time, both descending, as the reference does
// (stable, so list order breaks ties).
func (o *tiresiasOrder) referenceOrder(now int64, jobs []*JobState) {
	// The previous pass's end: waiting jobs behind running ones, per queue.
	o.sorted = append(o.sorted[:0], jobs...)
	slices.SortStableFunc(o.sorted, func(a, b *JobState) int {
		if c := cmp.Compare(a.Account.Queue, b.Account.Queue); c != 0 {
			return c
		}
		if ra, rb := a.Status == Running, b.Status == Running; ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.listPos, b.listPos)
	})
	for _, j := range o.sorted {
		if j.listPos != 0 {
			o.nextPos++
			j.listPos = o.nextPos
		}
	}
	if o.index == nil {
		o.index = make(map[*JobState]float64)
	}
	clear(o.index)
	// This pass's entries, in arrival order, join the back.
	for i := range o.results {
		res, j := &o.results[i], jobs[i]
		promoted, moved := j.Account.Apply(now, *res)
		if j.listPos == 0 || promoted || moved {
			o.nextPos++
			j.listPos = o.nextPos
		}
		o.index[j] = res.Factors.Gittins
	}
	gittins := o.cfg.Mode == priority.ModeGittins
	slices.SortStableFunc(jobs, func(a, b *JobState) int {
		if c := cmp.Compare(a.Account.Queue, b.Account.Queue); c != 0 {
			return c
		}
		if gittins {
			if c := cmp.Compare(o.index[b], o.index[a]); c != 0 {
				return c
			}
			if c := cmp.Compare(b.Job.Submit, a.Job.Submit); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.listPos, b.listPos)
	})
}

// NextChange is the next demotion of a running job (its queue service
// reaching the next threshold) or promotion of a pending one (its wait
// reaching PromoteKnob × its last run), whichever is first.
func (o *tiresiasOrder) NextChange(now float64, jobs []*JobState) float64 {
	next := math.Inf(1)
	th := o.inForce.Thresholds
	knob := o.cfg.PromoteKnob
	for _, j := range jobs {
		switch j.Status {
		case Running:
			s := j.QueueService(now)
			if q := priority.QueueOf(o.inForce, s); q < len(th) {
				g := float64(j.Job.GPUs)
				if o.reference {
					// The reference simulator computes its next demotion
					// from the run's seconds, not its GPU-seconds, so it
					// wakes later than the crossing for multi-GPU jobs
					// (and acts on it at whatever event comes first).
					next = min(next, now+math.Ceil((th[q]-s/g)/g))
				} else {
					next = min(next, now+(th[q]-s)/j.serviceRate())
				}
			}
		case Pending:
			if a := &j.Account; knob > 0 && a.Queue > 0 && a.LastRun > 0 {
				next = min(next, float64(a.WaitingSince)+knob*a.LastRun)
			}
		}
	}
	return next
}

// jobDone keeps a completed job's last service for its account's
// fair-share usage and feeds the learned Gittins distribution.
func (o *tiresiasOrder) jobDone(j *JobState) error {
	if o.fair != nil {
		o.fair.finished(j)
	}
	gpuSeconds := j.Account.ServiceClosed
	// Every simulated job runs to its end (traces carry no cancellations
	// or failures), so every end is a sample, as a COMPLETED job's is in
	// the core; a trace has one partition, so keys leave it empty.
	o.siblings.Done(j.Job.ID, gpuSeconds)
	if o.learnEvery <= 0 {
		return nil
	}
	o.history = append(o.history, gpuSeconds)
	if len(o.history) > 2*priority.LearnWindow {
		o.history = append(o.history[:0], o.history[len(o.history)-priority.LearnWindow:]...)
	}
	o.sinceLearn++
	if o.sinceLearn < o.learnEvery || len(o.history) < priority.LearnMinHistory {
		return nil
	}
	o.sinceLearn = 0
	window := o.history[max(0, len(o.history)-priority.LearnWindow):]
	dist, err := priority.NewDistribution(window)
	if err != nil {
		return err
	}
	r, err := priority.NewRanker(o.cfg, dist)
	if err != nil {
		return err
	}
	o.ranker, o.inForce = r, r.Config()
	return nil
}
