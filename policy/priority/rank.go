package priority

import (
	"fmt"
	"math"
	"slices"
)

// Priority bounds. Slurm reads priority 0 as "held", so the policy never
// produces it; 0xFFFFFFFF is left alone as Slurm's own sentinel range top.
const (
	MinPriority uint32 = 1
	MaxPriority uint32 = 0xFFFFFFFE
)

// Ranker ranks snapshots of jobs under one validated Config. It keeps scratch
// buffers between passes so that steady-state passes do not allocate; for the
// same reason it is not safe for concurrent use.
type Ranker struct {
	cfg    Config
	dist   *Distribution // nil in LAS mode is fine
	deltas []float64     // Δ used for the Gittins index, per queue
	keys   []sortKey     // scratch, reused across passes
}

// NewRanker validates cfg and returns a Ranker for it. dist is the GPU-time
// history for the Gittins index and, with ThresholdQuantiles, for the
// thresholds; it is required in Gittins mode. Config returns the
// thresholds in force.
func NewRanker(cfg Config, dist *Distribution) (*Ranker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FairShare.Enabled {
		if err := cfg.FairShare.Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Opportunistic.Enabled {
		if err := cfg.Opportunistic.Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Mode == ModeGittins && dist == nil {
		return nil, fmt.Errorf("%w: mode: %q needs a GPU-time distribution", ErrInvalidConfig, ModeGittins)
	}
	cfg = cfg.WithDistribution(dist)
	deltas := make([]float64, cfg.Queues())
	for q := range deltas {
		deltas[q] = math.Inf(1)
		if q < len(cfg.Thresholds) {
			// The queue's upper threshold itself, as the paper and design
			// state it, not the service left before the job leaves the queue.
			deltas[q] = cfg.Thresholds[q]
		}
	}
	return &Ranker{cfg: cfg, dist: dist, deltas: deltas}, nil
}

// Config returns a copy of the Ranker's configuration.
func (r *Ranker) Config() Config { return r.cfg.clone() }

// Rank ranks every job of a pass, pending and running alike, since running
// jobs need priorities for preemption to compare against. It returns out[:0]
// extended with one Result per job, in the order of jobs; pass the previous
// pass's slice back as out to avoid allocating.
func (r *Ranker) Rank(now int64, jobs []Job, out []Result) []Result {
	n := len(jobs)
	out = slices.Grow(out[:0], n)[:n]
	r.keys = slices.Grow(r.keys[:0], n)[:n]
	keys := r.keys

	var count [4 * maxQueues]int
	guaranteedWaiting := 0
	if r.cfg.Opportunistic.strict() {
		for i := range jobs {
			if r.cfg.Opportunistic.waitsGuaranteed(now, &jobs[i]) {
				guaranteedWaiting++
			}
		}
	}
	for i := range jobs {
		job := &jobs[i]
		st := r.classify(now, job, guaranteedWaiting)
		band := r.bandOf(st.queue, st.opportunistic, job.Quota)
		if st.queue != job.Queue {
			// A job entering a queue joins its back. That includes a job
			// whose service now maps to a better queue without promotion
			// (e.g. a corrected ledger): the service is trusted, and the
			// move is still a fresh entry.
			st.entry = now
		}
		res := &out[i]
		*res = Result{ID: job.ID, Queue: st.queue, QueueEntry: st.entry, Promoted: st.promoted,
			Opportunistic: st.opportunistic, Upgraded: st.upgraded}
		r.fillFactors(now, job, st, &res.Factors)
		keys[i] = sortKey{
			queue:    int32(band),
			deferred: job.Deferred && job.State == Pending,
			over:     r.cfg.FairShare.Enabled && OverShare(job.FairShare),
			pair:     r.pairKey(res.Factors.Pair),
			index:    res.Factors.Gittins,
			entry:    st.entry,
			submit:   job.SubmitTime,
			id:       job.ID,
			jobSlot:  int32(i),
		}
		count[band]++
	}

	slices.SortFunc(keys, compareKeys)

	// Keys are band-major (a band is a queue, of the guaranteed or the
	// opportunistic class), so a job's position inside its band is its
	// rank minus the number of jobs in better bands.
	var start [4 * maxQueues]int
	for q := 1; q < r.bands(); q++ {
		start[q] = start[q-1] + count[q-1]
	}
	for rank, k := range keys {
		q := int(k.queue)
		res := &out[k.jobSlot]
		res.Rank = rank
		res.Factors.Tiresias = r.band(q, count[q], rank-start[q])
		res.Priority = r.priority(&res.Factors)
	}
	return out
}

// Standing gives the priority of a job at submission, before any pass has
// ranked it: its standing in its queue. It goes last in its queue: below
// every job a pass put in the same queue and above every job in the next
// one. In LAS mode that is where the next pass puts it too, since its queue
// entry is the latest; in Gittins mode the next pass may move it up within
// the queue by its index. No promotion is
// considered: a job being submitted has not waited. Rank is -1.
func (r *Ranker) Standing(now int64, job Job) Result {
	st := standing{queue: QueueOf(r.cfg, job.Service), entry: job.QueueEntry, service: job.Service,
		opportunistic: r.cfg.Opportunistic.Enabled && job.Opportunistic}
	if st.queue != job.Queue || job.QueueEntry == 0 {
		st.entry = now
	}
	res := Result{ID: job.ID, Queue: st.queue, QueueEntry: st.entry, Rank: -1, Opportunistic: st.opportunistic}
	r.fillFactors(now, &job, st, &res.Factors)
	k := r.bands()
	res.Factors.Tiresias = float64(k-1-r.bandOf(st.queue, st.opportunistic, job.Quota)) / float64(k)
	res.Priority = r.priority(&res.Factors)
	return res
}

// standing is where one job stands (queue, queue entry, service) before
// ordering: in a pass, or between passes for Standing.
type standing struct {
	queue    int
	entry    int64 // queue-entry time if the queue did not change
	promoted bool
	service  float64 // the service the job is judged by in this pass
	// opportunistic: ranked in the opportunistic class; upgraded: moved
	// out of it in this pass (opportunistic.go).
	opportunistic, upgraded bool
}

// classify applies the opportunistic upgrade (guaranteedWaiting: the
// pass's guaranteed GPU jobs waiting), starvation promotion, then the
// thresholds. An upgrade keeps the job's queue: it changes the job's
// class, not its Tiresias standing.
func (r *Ranker) classify(now int64, job *Job, guaranteedWaiting int) standing {
	upgraded := r.cfg.Opportunistic.upgrades(now, job, guaranteedWaiting)
	opportunistic := r.cfg.Opportunistic.Enabled && job.Opportunistic && !upgraded
	if r.promotes(now, job) {
		// Promotion resets the job's service; the caller resets the ledger's
		// counter when it sees Promoted.
		return standing{queue: 0, entry: now, promoted: true, service: 0, opportunistic: opportunistic, upgraded: upgraded}
	}
	st := standing{
		queue:         QueueOf(r.cfg, job.Service),
		entry:         job.QueueEntry,
		service:       job.Service,
		opportunistic: opportunistic,
		upgraded:      upgraded,
	}
	if upgraded && r.cfg.Opportunistic.strict() {
		// It enters the guaranteed class's queue at its back. By default
		// it was ranked among guaranteed jobs already and keeps its place.
		st.entry = now
	}
	return st
}

// pairKey is the pair score the order sorts by (order.go, 1c): under
// StrictOpportunistic the waiting opportunistic jobs of a band are the
// guests Slurm places beside guaranteed jobs, best pair first. By default
// they share queues with guaranteed jobs, whose order by attained service
// a pair score must not jump: the score then only steers placement
// (gpushare).
func (r *Ranker) pairKey(pair float64) float64 {
	if !r.cfg.Opportunistic.strict() {
		return 0
	}
	return pair
}

// promotes is the paper's starvation rule δ ≥ PROMOTEKNOB·t: a pending job
// below queue 0 that has waited at least knob × its last run goes back up.
// Jobs that never ran have no t to compare against and are left alone.
func (r *Ranker) promotes(now int64, job *Job) bool {
	knob := r.cfg.PromoteKnob
	if knob <= 0 || job.State != Pending || job.Queue <= 0 || !(job.LastRun > 0) {
		return false
	}
	return float64(now-job.WaitingSince) >= knob*job.LastRun
}

// fillFactors sets every factor except Tiresias, which needs the whole pass.
func (r *Ranker) fillFactors(now int64, job *Job, st standing, f *Factors) {
	if r.cfg.Mode == ModeGittins {
		delta := r.deltas[st.queue]
		// A job that has not run yet is ranked by the cluster's history:
		// else a user could end a one-second job just before a sweep's
		// other members and have them all jump their queue. Once a job
		// has run, its sweep applies only while its service is below an
		// ended member's, so gaming that costs the user real GPU-time.
		// Service inherited from an ended job (inherit.go) is not a run:
		// else every job submitted after a throw-away job's cancel would
		// qualify without having run.
		g, sweep := 0.0, false
		if st.service > 0 && job.Ran {
			g, sweep = job.Siblings.index(st.service, delta)
		}
		if sweep {
			f.Gittins, f.SiblingSamples = g, job.Siblings.Len()
		} else {
			f.Gittins = r.dist.Index(st.service, delta)
		}
	}
	if job.EligibleTime != 0 {
		f.Age = clamp01(float64(now-job.EligibleTime) / r.cfg.MaxAge)
	}
	f.Partition = clamp01(job.Partition)
	f.QOS = clamp01(job.QOS)
	f.Nice = job.Nice
	f.FairShare = clamp01(job.FairShare)
	if st.opportunistic && job.State == Pending {
		f.Pair = clamp01(job.Pair)
	}
}

// band is the Tiresias factor of the job at 0-based position pos among the n
// jobs of queue q. Queue q owns the open interval ((K−1−q)/K, (K−q)/K), so
// with the default weights no position inside a queue can overtake a better
// queue, and Standing's (K−1−q)/K sits between queue q and queue q+1.
//
// With the opportunistic class the same holds of bands: K guaranteed
// queues then K opportunistic ones, 2K bands in all (opportunistic.go).
func (r *Ranker) band(q, n, pos int) float64 {
	k := float64(r.bands())
	within := float64(n-pos) / float64(n+1)
	return (k - 1 - float64(q) + within) / k
}

// priority combines the factors into Slurm's 32-bit priority.
func (r *Ranker) priority(f *Factors) uint32 {
	w := r.cfg.Weights
	p := w.Tiresias*f.Tiresias + w.Age*f.Age + w.Partition*f.Partition + w.QOS*f.QOS -
		float64(f.Nice)
	p = math.Round(p)
	switch {
	case !(p >= float64(MinPriority)): // also catches NaN
		return MinPriority
	case p >= float64(MaxPriority):
		return MaxPriority
	}
	return uint32(p)
}

// clamp01 maps NaN to 0: a factor Slurm could not compute should not help.
func clamp01(v float64) float64 {
	switch {
	case !(v > 0):
		return 0
	case v > 1:
		return 1
	}
	return v
}
