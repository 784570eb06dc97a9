package sim

import (
	"math"
	"slices"
)

// Result is everything one simulation produced.
type Result struct {
	// Label names the simulation in reports (set by RunAll).
	Label          string
	Trace          string
	Policy         string
	Alloc          AllocMode
	Shape          Shape
	RestartPenalty float64
	PassInterval   float64
	Jobs           []JobResult
	// Runs holds every run of every job when Config.RecordRuns is set.
	Runs    []RunRecord
	Summary Summary
	Passes  int
	// Hetero is the heterogeneous summary of a run with Config.Hetero.
	Hetero *HeteroSummary
	// Accounts are the per-account (virtual cluster) figures, most GPU
	// time first.
	Accounts []AccountSummary
	// Sharing is the sharing report of a run with Config.Sharing.
	Sharing *SharingSummary
	// SharingHistory is every pair and promotion of a run with
	// Config.Sharing and Config.RecordRuns.
	SharingHistory *SharingHistory
}

// JobResult is one job's outcome.
type JobResult struct {
	ID uint32
	// Account is the job's account for fair share: its virtual cluster.
	Account     string
	GPUs        int
	Model       string
	Submit      float64
	Duration    float64
	FirstStart  float64
	Finish      float64
	JCT         float64
	Preemptions int
	Promotions  int
	// Speed is Duration over the time the job spent making progress: 1 at
	// the proportional share. MaxSpeed is its fastest run's speed, so
	// JCT ≥ Duration / MaxSpeed always holds.
	Speed    float64
	MaxSpeed float64
	// GPUSeconds is the GPU time the job held, restart penalties included.
	GPUSeconds float64
}

// RunRecord is one uninterrupted run of a job.
type RunRecord struct {
	JobID      uint32
	Start, End float64
	Slots      []RunSlot
}

// RunSlot is a run's share of one node.
type RunSlot struct {
	Node, GPUs, CPUs int
	MemGB            float64
}

// Summary is the table row of one simulation. JCT is job completion time,
// finish − submit, in seconds.
type Summary struct {
	Label     string    `json:"label"`
	Policy    string    `json:"policy"`
	Alloc     AllocMode `json:"alloc"`
	Jobs      int       `json:"jobs"`
	AvgJCT    float64   `json:"avg_jct_s"`
	MedianJCT float64   `json:"median_jct_s"`
	P95JCT    float64   `json:"p95_jct_s"`
	P99JCT    float64   `json:"p99_jct_s"`
	// Makespan is from the first submission to the last completion.
	Makespan float64 `json:"makespan_s"`
	// GPUUtil is the GPU-seconds jobs held (restart penalties included)
	// over cluster GPUs × makespan.
	GPUUtil     float64 `json:"gpu_util"`
	Preemptions int     `json:"preemptions"`
	// PreemptionsPerJob is Preemptions over Jobs; PreemptionsP50 and
	// PreemptionsP99 are percentiles (nearest rank) of the per-job counts
	// that jobs.csv lists, the tail issue 11 bounds.
	PreemptionsPerJob float64 `json:"preemptions_per_job"`
	PreemptionsP50    float64 `json:"preemptions_p50"`
	PreemptionsP99    float64 `json:"preemptions_p99"`
	Promotions        int     `json:"promotions"`
	// AvgSpeed is the mean over jobs of duration / time spent running, 1
	// under proportional allocation; above 1 where Synergy helped.
	AvgSpeed float64 `json:"avg_speed"`
}

func (e *engine) result(trace *Trace) *Result {
	r := &Result{
		Trace:          trace.Name,
		Policy:         e.cfg.Policy,
		Alloc:          e.cfg.Alloc,
		Shape:          e.cfg.Shape,
		RestartPenalty: e.cfg.RestartPenalty,
		PassInterval:   e.cfg.PassInterval,
		Jobs:           make([]JobResult, len(e.jobs)),
		Runs:           e.runs,
		Passes:         int(e.passes),
	}
	for i := range e.jobs {
		j := &e.jobs[i]
		r.Jobs[i] = JobResult{
			ID:          j.Job.ID,
			Account:     j.Job.Cluster,
			GPUs:        j.Job.GPUs,
			Model:       j.Model,
			Submit:      j.Job.Submit,
			Duration:    j.Job.Duration,
			FirstStart:  j.FirstStart,
			Finish:      j.Finish,
			JCT:         j.Finish - j.Job.Submit,
			Preemptions: j.Preemptions,
			Promotions:  j.Account.Promotions,
			Speed:       j.Job.Duration / j.progressTime,
			MaxSpeed:    j.maxSpeed,
			GPUSeconds:  j.heldGPUSeconds,
		}
	}
	r.Summary = summarise(r, e.busyGPUSeconds, e.preemptions)
	r.Accounts = e.accts.summaries(r.Jobs)
	r.Hetero = e.heteroSummary()
	r.Sharing = e.sharingSummary(r)
	if e.sh != nil {
		r.SharingHistory = e.sh.hist
	}
	return r
}

func summarise(r *Result, busy float64, preemptions int) Summary {
	s := Summary{Policy: r.Policy, Alloc: r.Alloc, Jobs: len(r.Jobs), Preemptions: preemptions}
	if len(r.Jobs) == 0 {
		return s
	}
	jcts := make([]float64, len(r.Jobs))
	perJob := make([]float64, len(r.Jobs))
	first, last := math.Inf(1), math.Inf(-1)
	var sum, speed float64
	for i, j := range r.Jobs {
		jcts[i] = j.JCT
		perJob[i] = float64(j.Preemptions)
		sum += j.JCT
		first = min(first, j.Submit)
		last = max(last, j.Finish)
		s.Promotions += j.Promotions
		speed += j.Speed
	}
	s.AvgSpeed = speed / float64(len(r.Jobs))
	slices.Sort(jcts)
	s.AvgJCT = sum / float64(len(jcts))
	s.MedianJCT = Median(jcts)
	s.P95JCT = Percentile(jcts, 95)
	s.P99JCT = Percentile(jcts, 99)
	slices.Sort(perJob)
	s.PreemptionsPerJob = float64(preemptions) / float64(len(r.Jobs))
	s.PreemptionsP50 = Percentile(perJob, 50)
	s.PreemptionsP99 = Percentile(perJob, 99)
	s.Makespan = last - first
	if s.Makespan > 0 {
		s.GPUUtil = busy / (float64(r.Shape.GPUs()) * s.Makespan)
	}
	return s
}

// Median of sorted values: the middle one, or the mean of the two middle
// ones.
func Median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// Percentile of sorted values by the nearest-rank method: the smallest
// value with at least p% of the values at or below it.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}
