package sim

import (
	"cmp"
	"math"
	"slices"
)

// bySubmit is the trace order: time of entry into the queue (the submit
// time, or an opportunistic job's promotion), then ID.
func bySubmit(a, b *JobState) int {
	if c := cmp.Compare(a.entry, b.entry); c != 0 {
		return c
	}
	return cmp.Compare(a.Job.ID, b.Job.ID)
}

// submitOrder is FIFO. The engine keeps active jobs in arrival order
// already, so the sort finds a sorted slice and costs one comparison per
// job.
type submitOrder struct{}

func (submitOrder) Order(_ float64, jobs []*JobState, _ []float64) { slices.SortFunc(jobs, bySubmit) }

func (submitOrder) NextChange(float64, []*JobState) float64 { return math.Inf(1) }

// ageOrder is Slurm's multifactor priority with the age and (optional)
// job-size factors. Slurm rounds the weighted sum to an integer, so jobs
// whose ages differ by less than MaxAge/weight tie, as do all jobs older
// than MaxAge; ties go to the earlier submission, then the lower ID.
type ageOrder struct {
	age, maxAge, size float64
	clusterGPUs       float64
}

func (o *ageOrder) Order(now float64, jobs []*JobState, _ []float64) {
	for _, j := range jobs {
		f := o.age * min(1, (now-j.entry)/o.maxAge)
		if o.size > 0 {
			f += o.size * (1 - min(1, float64(j.Job.GPUs)/o.clusterGPUs))
		}
		j.sortKey = math.Round(f)
	}
	slices.SortFunc(jobs, func(a, b *JobState) int {
		if c := cmp.Compare(b.sortKey, a.sortKey); c != 0 {
			return c
		}
		return bySubmit(a, b)
	})
}

func (o *ageOrder) NextChange(float64, []*JobState) float64 { return math.Inf(1) }

// remainingOrder is SRTF with known durations: least remaining work (in
// seconds at the proportional share) first, ties by submit time and ID. Its
// level is the remaining work, so a job preempts only jobs with strictly
// more left. A running job's remaining work only shrinks, so the order
// changes only at arrivals and completions.
type remainingOrder struct{}

func (remainingOrder) Order(now float64, jobs []*JobState, levels []float64) {
	for _, j := range jobs {
		j.sortKey = j.RemainingAt(now)
	}
	slices.SortFunc(jobs, func(a, b *JobState) int {
		if c := cmp.Compare(a.sortKey, b.sortKey); c != 0 {
			return c
		}
		return bySubmit(a, b)
	})
	for i, j := range jobs {
		levels[i] = j.sortKey
	}
}

func (remainingOrder) NextChange(float64, []*JobState) float64 { return math.Inf(1) }
