package sharing

import (
	"errors"
	"fmt"
	"math"
)

// ErrBadConfig is wrapped by every configuration error.
var ErrBadConfig = errors.New("bad sharing configuration")

// Class is a job's sharing class.
type Class uint8

const (
	// Guaranteed jobs hold their GPUs as Slurm gives them; the default.
	Guaranteed Class = iota
	// Opportunistic jobs use what guaranteed jobs leave, yield first and
	// never preempt.
	Opportunistic
)

func (c Class) String() string {
	if c == Opportunistic {
		return "opportunistic"
	}
	return "guaranteed"
}

// ParseClass reads "guaranteed" or "opportunistic"; "" is guaranteed, so
// inputs written before classes existed read the same.
func ParseClass(s string) (Class, error) {
	switch s {
	case "", "guaranteed":
		return Guaranteed, nil
	case "opportunistic":
		return Opportunistic, nil
	}
	return Guaranteed, fmt.Errorf("%w: class %q is not guaranteed or opportunistic", ErrBadConfig, truncate(s, 32))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Config is the sharing rules' settings (lachesis.yaml's sharing section).
// Validate it once; the rules assume a valid one.
type Config struct {
	// MaxSlowdown is the largest loss of its solo rate a guaranteed job
	// may suffer from an opportunistic neighbour: predicted, to pack the
	// pair, and measured, to keep it. 0.05 by default (issue 22).
	MaxSlowdown float64
	// PromoteAfter is how long an opportunistic job waits (seconds,
	// pending in total since submission) before it is promoted to
	// guaranteed.
	PromoteAfter float64
	// StrictOpportunistic is the first rule for the opportunistic class
	// (lachesis.yaml's sharing.strict_opportunistic, off by default): an
	// opportunistic job waits behind every guaranteed job, any guaranteed
	// job evicts it, and it is upgraded only at a pass where no guaranteed
	// job waits. Off (the default), an opportunistic job competes with
	// every job by attained service for idle GPUs (the policy's order), is
	// evicted only by a guaranteed job ranked above it, the one that has
	// run least since it started first (least work thrown away), and is
	// upgraded after PromoteAfter whether or not guaranteed jobs wait
	// (PromoteNow). docs/evaluation section 8 measures both: strict, the
	// class starved (2D-Gittins on the busy week: opportunistic JCT 9.7 h
	// without sharing, 122 h with it).
	StrictOpportunistic bool
	// TryUnmeasured lets Choose pack a pair the table does not hold when
	// no measured or seeded pair qualifies: the pair is then measured and
	// kept or reverted (Gandiva's introspection). Off, only pairs the
	// table predicts harmless are packed.
	TryUnmeasured bool
	// MoveAfter is how long a guest shares a GPU (seconds) before it is
	// moved to a whole GPU that stays idle: in Slurm a requeue (a shard
	// allocation cannot grow), which costs a restart. 0: never moved.
	MoveAfter float64
	// GuestMemoryHeadroomPct is the share of a GPU's memory (percent)
	// kept free beside the guaranteed jobs' measured peak; guests hold
	// the rest at most (MemoryOver, memory.go).
	GuestMemoryHeadroomPct float64
	// Convert: the rewrite of a guaranteed one-GPU job into shards of one
	// GPU at submit (shards.go); the zero value is off. Slurm's only: the
	// simulator's guests share a GPU without shards.
	Convert ShardConvert
}

// DefaultPromoteAfter is 4 hours. An opportunistic job is one its owner
// marked as able to wait; the bound is on how long. 93% of the Philly
// trace's jobs run 4 hours or less, so a job promoted then has waited
// longer than most jobs run. Under the default rule an opportunistic job
// already stands in the order by its attained service, and the upgrade
// only ends its exposure to eviction, so the value matters little
// (docs/evaluation section 8 measures 4 h). Under StrictOpportunistic the
// first sweep found 1, 4 and 16 hours alike: where guaranteed jobs keep
// waiting, the guaranteed backlog, not promote_after, decided when
// opportunistic jobs start.
const DefaultPromoteAfter = 4 * 3600

// DefaultMoveAfter is 10 minutes. A move costs about 3 minutes without
// progress (the simulator's 60 s restart and Slurm's 121 s requeue hold);
// at the median co-located speed of Gavel's V100 pairs (0.65 of alone) a
// guest wins 0.35 s per second alone, so the move pays once about 9
// minutes of work remain, and a job that has already run 10 minutes is
// likely to run longer (job durations in the Philly trace are
// heavy-tailed).
const DefaultMoveAfter = 600

// DefaultConfig is the rules' default: 5% slowdown, promotion after
// DefaultPromoteAfter, unmeasured pairs tried, guests moved after
// DefaultMoveAfter, DefaultGuestMemoryHeadroomPct of a GPU's memory kept
// free beside its guaranteed jobs, the shard rewrite off
// (DefaultShardConvert).
func DefaultConfig() Config {
	return Config{MaxSlowdown: 0.05, PromoteAfter: DefaultPromoteAfter, TryUnmeasured: true, MoveAfter: DefaultMoveAfter,
		GuestMemoryHeadroomPct: DefaultGuestMemoryHeadroomPct, Convert: DefaultShardConvert()}
}

// Validate checks a configuration once, at load.
func (c Config) Validate() error {
	if math.IsNaN(c.MaxSlowdown) || c.MaxSlowdown < 0 || c.MaxSlowdown >= 1 {
		return fmt.Errorf("%w: max_slowdown %v must be in [0, 1)", ErrBadConfig, c.MaxSlowdown)
	}
	if math.IsNaN(c.PromoteAfter) || math.IsInf(c.PromoteAfter, 0) || c.PromoteAfter <= 0 {
		return fmt.Errorf("%w: promote_after %v must be a finite number of seconds > 0 (bounded starvation)", ErrBadConfig, c.PromoteAfter)
	}
	if math.IsNaN(c.MoveAfter) || math.IsInf(c.MoveAfter, 0) || c.MoveAfter < 0 {
		return fmt.Errorf("%w: move_after %v must be a finite number of seconds >= 0", ErrBadConfig, c.MoveAfter)
	}
	return c.validateMemory()
}

// Choice is the outcome of Choose.
type Choice struct {
	// Index is the chosen guest's place in the candidates.
	Index int
	// Predicted is the pair's speeds with the guaranteed job first; zero
	// for an unmeasured pair.
	Predicted Speeds
	// Unmeasured: the table had no entry; the pair is a trial to measure.
	Unmeasured bool
}

// Choose picks which opportunistic job goes beside a guaranteed job of
// model host: among guests (their models), the one with the least
// predicted loss for the host, never above MaxSlowdown, never a pair
// marked bad or one that did not run together (fraction 0), never one
// whose two jobs together would do no more than the host alone (Gains);
// ties go to the guest that runs faster beside it, then to the earlier
// candidate (the caller's order: who waited longest). With TryUnmeasured, a guest whose
// pair the table lacks is chosen only when no held pair qualifies. ok is
// false when no guest may go beside host.
func (c Config) Choose(t Pairs, host string, guests []string) (ch Choice, ok bool) {
	best, bestLoss, bestGuest := -1, math.Inf(1), -1.0
	firstUnmeasured := -1
	for i, g := range guests {
		s, _, held := t.Lookup(host, g)
		if !held {
			if firstUnmeasured < 0 {
				firstUnmeasured = i
			}
			continue
		}
		if t.Bad(host, g) || s.Of <= 0 || s.Beside <= 0 {
			continue
		}
		loss := 1 - s.Of
		if loss > c.MaxSlowdown+lossEpsilon || !Gains(s) {
			continue
		}
		if loss < bestLoss || (loss == bestLoss && s.Beside > bestGuest) {
			best, bestLoss, bestGuest = i, loss, s.Beside
			ch = Choice{Index: i, Predicted: s}
		}
	}
	if best >= 0 {
		return ch, true
	}
	if c.TryUnmeasured && firstUnmeasured >= 0 {
		return Choice{Index: firstUnmeasured, Unmeasured: true}, true
	}
	return Choice{}, false
}

// Fits says whether guest may go beside a guaranteed job of model host:
// Choose's rule for that one pair. It is false for a pair marked bad, one
// that did not run together, or one predicted to cost host more than
// MaxSlowdown; an unmeasured pair fits only with TryUnmeasured. predicted
// is host's speed beside guest as the table holds it (Speeds.Of), 0 when
// the table has no figure: what a caller ranks waiting guests by.
func (c Config) Fits(t Pairs, host, guest string) (fits bool, predicted float64) {
	ch, ok := c.Choose(t, host, []string{guest})
	if !ok {
		return false, 0
	}
	return true, ch.Predicted.Of
}

// Loss is the share of its solo rate a job lost: 1 − shared/solo. Rates
// are any unit (iterations/s, or GPU utilisation where a job reports no
// progress), the same for both. NaN when solo is not a positive number.
func Loss(solo, shared float64) float64 {
	if !(solo > 0) || math.IsInf(solo, 0) || math.IsNaN(shared) || shared < 0 {
		return math.NaN()
	}
	return 1 - shared/solo
}

// Revert says whether the opportunistic job beside a guaranteed one must
// go: the guaranteed job's measured rate beside it lost more than
// MaxSlowdown of its solo rate. Rates that are not numbers decide nothing
// (false): the pair is judged on the next good measurement. After a
// revert, the caller requeues the opportunistic job and calls
// Table.MarkBad for the pair.
func (c Config) Revert(solo, shared float64) bool {
	l := Loss(solo, shared)
	return !math.IsNaN(l) && l > c.MaxSlowdown+lossEpsilon
}

// Gains says whether a pair does more useful work on its GPU than the
// guaranteed job alone: the two fractions of their solo speeds (the
// guaranteed job's first) sum to more than 1 (Gandiva keeps a packing only
// when it raises measured throughput). A pair that does not gain only
// slows the guaranteed job for work the guest would do faster on a GPU of
// its own once one is free.
func Gains(s Speeds) bool { return s.Of+s.Beside > 1+lossEpsilon }

// RevertPair is Revert with both jobs measured: the opportunistic job must
// go when the guaranteed job lost more than MaxSlowdown (Revert), or when
// the pair's measured fractions do not gain over the guaranteed job alone
// (Gains). Rates that are not numbers decide nothing for their job: with
// the guest's unknown, only Revert applies.
func (c Config) RevertPair(hostSolo, hostShared, guestSolo, guestShared float64) bool {
	if c.Revert(hostSolo, hostShared) {
		return true
	}
	hl, gl := Loss(hostSolo, hostShared), Loss(guestSolo, guestShared)
	if math.IsNaN(hl) || math.IsNaN(gl) {
		return false
	}
	return !Gains(Speeds{Of: 1 - hl, Beside: 1 - gl})
}

// lossEpsilon keeps a loss of exactly MaxSlowdown (1 − 95/100 is
// 0.05000000000000004 in floating point) within the limit.
const lossEpsilon = 1e-9

// Promote says whether an opportunistic job that has waited (seconds
// pending, in total since its submission) is promoted to guaranteed. A
// promoted job joins the guaranteed class as a job submitted at its
// promotion: behind the guaranteed jobs already waiting in its queue
// (Tiresias's queue entry and starvation wait start then), with the
// service it attained while opportunistic kept.
func (c Config) Promote(waited float64) bool { return waited >= c.PromoteAfter }

// PromoteNow is Promote at a pass (guaranteedWaiting: how many
// guaranteed jobs are pending, requeue holds included).
//
// By default a job that has waited PromoteAfter is upgraded at once: it
// already stands in the policy's order by its attained service, so the
// upgrade moves it past no guaranteed job; it only ends its exposure to
// eviction and lets it preempt as any job may (without sharing it would
// have had both from its submission).
//
// With StrictOpportunistic it is upgraded only at a pass where no
// guaranteed job waits, as AntMan upgrades when the guaranteed quota has
// room: there a job upgraded while guaranteed jobs wait would jump from
// behind every guaranteed job into their competition (in the simulator a
// FIFO queue's upgraded jobs pushed guaranteed jobs' average JCT to
// ×1.78), so its wait is bounded by PromoteAfter and by the guaranteed
// backlog, which in a busy cluster does not clear.
func (c Config) PromoteNow(waited float64, guaranteedWaiting int) bool {
	return (!c.StrictOpportunistic || guaranteedWaiting == 0) && c.Promote(waited)
}

// Move says whether a guest that has shared a GPU for sharedFor seconds
// is requeued to run alone, when a whole GPU stays idle after every
// waiting opportunistic job was placed (Gandiva's migration, done the
// Slurm way).
func (c Config) Move(sharedFor float64) bool { return c.MoveAfter > 0 && sharedFor >= c.MoveAfter }
