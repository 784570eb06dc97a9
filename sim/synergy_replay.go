package sim

import (
	"fmt"
	"math"

	"github.com/lachesis-sched/lachesis/sim/trace"
)

// Window is a half-open range of job IDs, [From, To), whose jobs a
// measurement averages over.
type Window struct{ From, To uint32 }

// SynergyWindow is the Synergy simulator's measurement window: it averages
// the JCT of jobs 4000–4999 only, leaving out the warm-up of an empty
// cluster, and keeps jobs arriving until all of those have finished.
var SynergyWindow = Window{From: 4000, To: 5000}

func (w Window) contains(id uint32) bool { return id >= w.From && id < w.To }

// WindowAvgJCT is the average JCT of a result's jobs inside the window and
// how many there were.
func WindowAvgJCT(r *Result, w Window) (float64, int) {
	var sum float64
	n := 0
	for _, j := range r.Jobs {
		if w.contains(j.ID) {
			sum += j.JCT
			n++
		}
	}
	if n == 0 {
		return math.NaN(), 0
	}
	return sum / float64(n), n
}

// maxReplayRounds bounds how often ReplaySynergy grows a job list. Under a
// policy where no later arrival delays an earlier job (strict FIFO) the
// second round always suffices; one that lets later jobs overtake for
// ever (FIFO with skipping, on an overloaded cluster, starves 8-GPU jobs
// while 1-GPU jobs keep arriving) never drains, and is refused.
const maxReplayRounds = 4

// ReplaySynergy generates the job list w and simulates every variant on it,
// measuring as the Synergy simulator does: arrivals go on until every job
// of the window has finished in every variant. It starts with w.Jobs jobs
// (at least the window's end) and, while some window job finishes after
// the last arrival, regenerates a longer list with the same seed (which
// begins with the shorter one) and runs again. Jobs that arrive after the
// window's last completion cannot change the window's JCTs, so the result
// equals that of an endless arrival stream. It returns the results and the
// list they ran on.
func ReplaySynergy(w trace.SynergyWorkload, window Window, variants []Variant, parallel int) ([]*Result, *Trace, error) {
	if window.To <= window.From {
		return nil, nil, fmt.Errorf("%w: empty measurement window [%d, %d)", trace.ErrBadWorkload, window.From, window.To)
	}
	w.Jobs = max(w.Jobs, int(window.To))
	for round := 1; ; round++ {
		tr, err := trace.GenerateSynergyJobs(w)
		if err != nil {
			return nil, nil, err
		}
		results, err := RunAll(tr, variants, parallel)
		if err != nil {
			return nil, nil, err
		}
		var lastFinish float64
		for _, r := range results {
			for _, j := range r.Jobs {
				if window.contains(j.ID) {
					lastFinish = max(lastFinish, j.Finish)
				}
			}
		}
		lastArrival := tr.Jobs[len(tr.Jobs)-1].Submit
		if lastArrival >= lastFinish {
			return results, tr, nil
		}
		if round == maxReplayRounds {
			return nil, nil, fmt.Errorf("%w: the window's jobs still run after %d arrivals: later arrivals keep delaying them", trace.ErrBadWorkload, w.Jobs)
		}
		// Enough jobs to reach the window's last completion at the
		// observed rate, plus a margin; the completion moves later as
		// more jobs compete, hence the margin.
		grow := float64(w.Jobs) * (lastFinish / lastArrival) * 1.1
		w.Jobs = max(int(grow)+100, w.Jobs*5/4)
	}
}
