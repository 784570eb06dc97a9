package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/priority"
)

// tiresiasOrder ranks jobs with priority.Ranker, the same code that runs
// inside slurmctld, and keeps each job's queue, queue entry, promotion and
// waiting time between passes the way the core's ledger does.
type tiresiasOrder struct {
	cfg        priority.Config
	seed       *priority.Distribution
	ranker     *priority.Ranker
	learnEvery int
	history    []float64 // GPU-seconds of completed jobs, oldest first
	sinceLearn int

	jobs    []priority.Job
	results []priority.Result
	sorted  []*JobState
}

func newTiresiasOrder(name string, opts PolicyOptions) (*tiresiasOrder, error) {
	cfg := opts.Tiresias
	cfg.Thresholds = slices.Clone(cfg.Thresholds)
	cfg.Mode = priority.ModeLAS
	dist := opts.Gittins
	if name == PolicyGittins {
		cfg.Mode = priority.ModeGittins
		if dist == nil {
			dist = priority.SeedDistribution()
		}
	}
	r, err := priority.NewRanker(cfg, dist)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadConfig, name, err)
	}
	o := &tiresiasOrder{cfg: cfg, seed: dist, ranker: r}
	if name == PolicyGittins {
		o.learnEvery = opts.LearnEvery
	}
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
		o.jobs = append(o.jobs, pj)
	}
	o.results = o.ranker.Rank(nowSec, o.jobs, o.results)
	o.sorted = slices.Grow(o.sorted[:0], len(jobs))[:len(jobs)]
	for i := range o.results {
		res, j := &o.results[i], jobs[i]
		j.Account.Apply(nowSec, *res)
		o.sorted[res.Rank] = j
	}
	copy(jobs, o.sorted)
	for i, j := range jobs {
		levels[i] = float64(j.Account.Queue)
	}
}

// NextChange is the next demotion of a running job (its queue service
// reaching the next threshold) or promotion of a pending one (its wait
// reaching PromoteKnob × its last run), whichever is first.
func (o *tiresiasOrder) NextChange(now float64, jobs []*JobState) float64 {
	next := math.Inf(1)
	th := o.cfg.Thresholds
	knob := o.cfg.PromoteKnob
	for _, j := range jobs {
		switch j.Status {
		case Running:
			s := j.QueueService(now)
			if q := priority.QueueOf(o.cfg, s); q < len(th) {
				next = min(next, now+(th[q]-s)/j.serviceRate())
			}
		case Pending:
			if a := &j.Account; knob > 0 && a.Queue > 0 && a.LastRun > 0 {
				next = min(next, float64(a.WaitingSince)+knob*a.LastRun)
			}
		}
	}
	return next
}

// jobDone feeds the learned Gittins distribution.
func (o *tiresiasOrder) jobDone(gpuSeconds float64) error {
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
	o.ranker = r
	return nil
}
