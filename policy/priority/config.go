package priority

import (
	"errors"
	"math"
	"slices"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

const (
	// MaxThresholds bounds the number of queues (MaxThresholds+1). More
	// queues than this buy nothing in the paper's sensitivity study and
	// would only make per-pass bookkeeping larger.
	MaxThresholds = 16
	// MaxWeightSum keeps the largest possible priority (every factor at 1)
	// inside Slurm's 32-bit priority, with headroom below 0xFFFFFFFE.
	MaxWeightSum = 4e9
)

// maxQueues sizes the fixed per-queue arrays of a pass.
const maxQueues = MaxThresholds + 1

// DefaultConfig is the single place the policy's defaults live, so that
// retuning them from a sweep touches one function.
//
// The mode, threshold quantiles, promote knob and preemption rule are the
// least-regret point of the sweep in docs/evaluation (section 3b): 4 VCs of
// the Philly trace at offered loads 0.8, 1.3 and 1.8 with a real cluster's
// preemption costs (60 s restart, 121 s requeue hold, 30 s passes, idle
// leftover GPUs), with sweeps (SiblingWindow): worst 1.23x SRTF's average
// JCT, at most 1.27 preemptions per job. Starvation promotion is off: with
// costs, promoted jobs holding
// long runs cost up to 9.4x SRTF in the worst slice, and with promotion
// allowed to preempt it drove up to 86 preemptions per job. Only the
// Tiresias weight is set, so the queue order alone decides the priority.
// Sweeps also lower the worst case on slices the defaults were not chosen
// on (held-out VCs and later jobs: 2.27x to 1.88x).
func DefaultConfig() Config {
	return Config{
		Mode:       ModeGittins,
		Thresholds: []float64{3250, 32500, 325000, 3250000},
		// Queue boundaries at the median, 75th and 99th percentile of
		// completed jobs' GPU-time: 2,227, 8,215 and 2,268,824 GPU-s on
		// the bundled seed, then the cluster's own once it has history.
		// The fixed list is the fallback without a distribution. With
		// sweeps on, the 75th percentile beats the former 90th on every
		// slice set's worst case (docs/evaluation, section 3c).
		ThresholdQuantiles: []float64{0.5, 0.75, 0.99},
		PromoteKnob:        0,
		Weights: Weights{
			Tiresias:  1e8,
			Age:       0,
			Partition: 0,
			QOS:       0,
		},
		MaxAge:     7 * 24 * 3600,
		Preemption: DefaultPreemption(),
		// Ten minutes: a sweep's jobs are submitted together, and on
		// the sweep (docs/evaluation section 5) 60 s to 20 minutes do
		// about as well.
		SiblingWindow: 600,
		// Cancel and resubmit keeps the service (inherit.go).
		InheritService: true,
	}
}

// FixThresholds sets a fixed list of thresholds, the admin's override of
// learned ones: ThresholdQuantiles are cleared so the list is what ranks.
func (c *Config) FixThresholds(th []float64) {
	c.Thresholds, c.ThresholdQuantiles = th, nil
}

// Queues is K, the number of queues.
func (c Config) Queues() int { return len(c.Thresholds) + 1 }

// Validate reports every problem in c at once, so an operator fixing a bad
// reload sees them all. Each error wraps ErrInvalidConfig and names the
// offending YAML key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, configerr.New(ErrInvalidConfig, key, format, args...))
	}

	switch c.Mode {
	case ModeLAS, ModeGittins:
	default:
		bad("mode", "%q is not %q or %q", c.Mode, ModeLAS, ModeGittins)
	}

	if len(c.Thresholds) > MaxThresholds {
		bad("thresholds", "%d thresholds, at most %d allowed", len(c.Thresholds), MaxThresholds)
	}
	for i, t := range c.Thresholds {
		if !(t > 0) || math.IsInf(t, 0) {
			bad("thresholds", "thresholds[%d] = %v must be a finite number > 0", i, t)
		}
		if i > 0 && !(t > c.Thresholds[i-1]) {
			bad("thresholds", "thresholds[%d] = %v must be greater than thresholds[%d] = %v",
				i, t, i-1, c.Thresholds[i-1])
		}
	}

	if len(c.ThresholdQuantiles) > MaxThresholds {
		bad("threshold_quantiles", "%d quantiles, at most %d allowed", len(c.ThresholdQuantiles), MaxThresholds)
	}
	for i, q := range c.ThresholdQuantiles {
		if !(q > 0 && q < 1) {
			bad("threshold_quantiles", "threshold_quantiles[%d] = %v must be in (0, 1)", i, q)
		}
		if i > 0 && !(q > c.ThresholdQuantiles[i-1]) {
			bad("threshold_quantiles", "threshold_quantiles[%d] = %v must be greater than threshold_quantiles[%d] = %v",
				i, q, i-1, c.ThresholdQuantiles[i-1])
		}
	}

	if !finiteNonNegative(c.PromoteKnob) {
		bad("promote_knob", "%v must be a finite number >= 0 (0 disables promotion)", c.PromoteKnob)
	}

	weights := []struct {
		key string
		v   float64
	}{
		{"weights.tiresias", c.Weights.Tiresias},
		{"weights.age", c.Weights.Age},
		{"weights.partition", c.Weights.Partition},
		{"weights.qos", c.Weights.QOS},
	}
	sum, sumOK := 0.0, true
	for _, w := range weights {
		if !finiteNonNegative(w.v) {
			bad(w.key, "%v must be a finite number >= 0", w.v)
			sumOK = false
		}
		sum += w.v
	}
	if sumOK && sum > MaxWeightSum {
		bad("weights", "sum %v exceeds %v, the priority would not fit in 32 bits", sum, float64(MaxWeightSum))
	}

	if !(c.MaxAge > 0) || math.IsInf(c.MaxAge, 0) {
		bad("max_age", "%v must be a finite number of seconds > 0", c.MaxAge)
	}
	if !finiteNonNegative(c.SiblingWindow) || c.SiblingWindow > MaxSiblingWindow {
		bad("sibling_window", "%v must be between 0 (off) and %d seconds", c.SiblingWindow, MaxSiblingWindow)
	}
	c.Preemption.validate(bad)

	return errors.Join(errs...)
}

// clone returns c with its own copy of Thresholds, so a Ranker cannot be
// changed behind its back by a caller reusing the slice.
func (c Config) clone() Config {
	c.Thresholds = slices.Clone(c.Thresholds)
	c.ThresholdQuantiles = slices.Clone(c.ThresholdQuantiles)
	return c
}

// WithDistribution is c with the thresholds it uses given dist: those at
// ThresholdQuantiles of dist when both are set, else c.Thresholds. Equal
// or zero GPU-times are dropped, so the result is a valid, strictly
// ascending list (possibly shorter).
func (c Config) WithDistribution(dist *Distribution) Config {
	c = c.clone()
	if len(c.ThresholdQuantiles) == 0 || dist == nil {
		return c
	}
	th := make([]float64, 0, len(c.ThresholdQuantiles))
	for _, q := range c.ThresholdQuantiles {
		v := dist.Quantile(q)
		if v > 0 && !math.IsInf(v, 0) && (len(th) == 0 || v > th[len(th)-1]) {
			th = append(th, v)
		}
	}
	c.Thresholds = th
	return c
}

// QueueOf is the queue a job with this attained service belongs to, absent
// promotion: the number of thresholds it has reached. A NaN service reaches
// none and lands in queue 0.
func QueueOf(cfg Config, service float64) int {
	q := 0
	for _, t := range cfg.Thresholds {
		if service >= t {
			q++
		}
	}
	return q
}

func finiteNonNegative(v float64) bool {
	return v >= 0 && !math.IsInf(v, 1)
}
