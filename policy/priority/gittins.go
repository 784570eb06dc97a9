package priority

import (
	"errors"
	"math"
	"slices"
)

// ErrNoSamples is returned by NewDistribution when no sample is usable.
var ErrNoSamples = errors.New("priority: no usable GPU-time samples")

// Distribution is the empirical distribution S of completed jobs' GPU-time
// that the 2D-Gittins index is computed against. It is immutable once built,
// so one Distribution may be shared by any number of Rankers and goroutines.
type Distribution struct {
	sorted []float64 // samples, ascending
	prefix []float64 // prefix[i] = sum of sorted[:i]; len(sorted)+1 entries
}

// NewDistribution builds a Distribution from samples of GPU-seconds. It keeps
// its own copy. Non-finite and negative values are dropped rather than
// rejected because they come from history that a single bad record should
// not make unusable.
func NewDistribution(samples []float64) (*Distribution, error) {
	sorted := make([]float64, 0, len(samples))
	for _, s := range samples {
		if s >= 0 && !math.IsInf(s, 1) {
			sorted = append(sorted, s)
		}
	}
	if len(sorted) == 0 {
		return nil, ErrNoSamples
	}
	slices.Sort(sorted)
	prefix := make([]float64, len(sorted)+1)
	for i, s := range sorted {
		prefix[i+1] = prefix[i] + s
	}
	return &Distribution{sorted: sorted, prefix: prefix}, nil
}

// Quantile is the smallest sample s such that at least a fraction q of
// the samples are <= s (q is clamped to [0,1]).
func (d *Distribution) Quantile(q float64) float64 {
	n := len(d.sorted)
	i := int(math.Ceil(q*float64(n))) - 1
	return d.sorted[min(max(i, 0), n-1)]
}

// Len is the number of samples kept.
func (d *Distribution) Len() int { return len(d.sorted) }

// Index is the 2D-Gittins index of a job that has attained a GPU-seconds of
// service, with a service quantum of delta:
//
//	G(a, Δ) = P(S − a ≤ Δ | S > a) / E[min(S − a, Δ) | S > a]
//
// i.e. the chance the job finishes within the next Δ, per unit of service it
// is expected to use in that time. delta = +Inf is allowed (the last queue
// has no upper threshold); then P = 1 and the denominator is the mean
// residual E[S − a | S > a].
//
// The Tiresias reference simulator sums s_k instead of s_k − a in the
// denominator; that is E[min(S, a+Δ)] rather than the expected remaining
// service. We follow the paper's formula, which is what makes the index a
// completion rate.
//
// Choices at the edges: when no sample exceeds a, the job has outlived
// everything in history and nothing predicts when it ends, so it gets 0,
// the lowest possible index. A delta that is not > 0 (or NaN) also gives 0:
// no job can finish within a non-positive quantum.
//
// It runs in O(log n) with two binary searches and the prefix sums, and
// does not allocate.
func (d *Distribution) Index(attained, delta float64) float64 {
	return gittinsIndex(d.sorted, d.prefix, attained, delta)
}

// gittinsIndex is Index over ascending samples and their prefix sums
// (prefix[i] = sum of sorted[:i]), shared with a sweep's history.
func gittinsIndex(sorted, prefix []float64, attained, delta float64) float64 {
	if !(delta > 0) {
		return 0
	}
	n := len(sorted)
	i := upperBound(sorted, attained) // first sample > a
	if i == n {
		return 0
	}
	j := n // first sample > a+Δ
	if !math.IsInf(delta, 1) {
		j = i + upperBound(sorted[i:], attained+delta)
	}
	done := float64(j - i) // samples finishing within Δ
	// Σ_{k∈[i,j)} (s_k − a), split as Σ(s_k − s_i) + (j−i)(s_i − a): the
	// second term is exact and > 0 whenever j > i, and the first is clamped
	// at 0 against rounding in the prefix sums, so the denominator stays
	// strictly positive even when a sits a hair below a sample.
	spread := max(0, prefix[j]-prefix[i]-done*sorted[i])
	denom := spread + done*(sorted[i]-attained)
	if j < n {
		denom += float64(n-j) * delta // samples still running after Δ
	}
	// Both P and E are conditioned on the same n−i samples; the count
	// cancels.
	return done / denom
}

// upperBound is the index of the first element of the ascending s that is
// > x, or len(s). A NaN x compares false with everything and yields len(s).
func upperBound(s []float64, x float64) int {
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s[mid] > x {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}
