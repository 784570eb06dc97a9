package profiler

import (
	"math/bits"
	"slices"

	"github.com/lachesis-sched/lachesis/profile"
)

// measureFunc measures the workload at cpus cores. point is the number of
// the point (1-based) and points the sweep's current estimate of its
// total, for progress reports.
type measureFunc func(cpus, point, points int) (profile.Measurement, error)

// sweepCPUs measures throughput at CPU counts chosen from counts (ascending)
// and returns the measurements in ascending order of CPUs.
//
// The search is Synergy's with its linear step replaced by a bisection.
// Synergy starts at the largest count, halves it while throughput stays
// within tol of the best seen, and once it drops out steps down one GPU's
// worth of CPUs at a time. Here, once a halving drops out, the knee lies
// between that count (too few) and the previous one (enough), and a binary
// search over the counts in between finds the smallest count within tol:
// O(log n) points where stepping takes O(n), the same answer for
// throughput that does not fall as CPUs are added. Counts in extra (the
// proportional share, which the matrix is normalised to) are measured too
// if the search did not reach them.
//
// With one count the sweep is that point; with two ({1, 2} on a 2-core
// node) it is both.
func sweepCPUs(counts []int, tol float64, extra []int, measure measureFunc) ([]profile.Measurement, error) {
	if len(counts) == 0 {
		return nil, nil
	}
	got := map[int]profile.Measurement{}
	best := 0.0
	pending := func(except int) []int { // extras not measured yet
		var out []int
		for _, c := range extra {
			if _, ok := got[c]; !ok && c != except && slices.Contains(counts, c) && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
		return out
	}
	take := func(i, left int) (bool, error) {
		c := counts[i]
		if m, ok := got[c]; ok {
			return m.Throughput >= (1-tol)*best, nil
		}
		m, err := measure(c, len(got)+1, len(got)+1+left+len(pending(c)))
		if err != nil {
			return false, err
		}
		got[c] = m
		best = max(best, m.Throughput)
		return m.Throughput >= (1-tol)*best, nil
	}

	good, bad := len(counts)-1, -1 // smallest index known enough, largest known too few
	if _, err := take(good, halvings(counts, good)); err != nil {
		return nil, err
	}
	for good > 0 && bad < 0 {
		i := halfIndex(counts, good)
		ok, err := take(i, halvings(counts, i))
		if err != nil {
			return nil, err
		}
		if ok {
			good = i
		} else {
			bad = i
		}
	}
	for good-bad > 1 {
		mid := (good + bad) / 2
		ok, err := take(mid, bisections(good-bad)-1)
		if err != nil {
			return nil, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	for _, c := range pending(0) {
		if _, err := take(slices.Index(counts, c), 0); err != nil {
			return nil, err
		}
	}

	out := make([]profile.Measurement, 0, len(got))
	for _, m := range got {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b profile.Measurement) int { return a.CPUs - b.CPUs })
	return out, nil
}

// halfIndex is the index of the largest count at most half of counts[i],
// and always below i.
func halfIndex(counts []int, i int) int {
	j := i - 1
	for j > 0 && counts[j] > counts[i]/2 {
		j--
	}
	return j
}

// halvings is how many more halvings can follow index i: an upper bound on
// the points left, for the progress estimate.
func halvings(counts []int, i int) int {
	n := 0
	for i > 0 {
		i = halfIndex(counts, i)
		n++
	}
	return n
}

// bisections is how many points a binary search over a gap of n indices
// measures.
func bisections(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}
