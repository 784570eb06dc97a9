package priority

import (
	"errors"
	"math"
	"sort"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

// Fair share between accounts.
//
// Tiresias orders jobs by their own attained service only, so one account
// that submits a thousand short jobs keeps queue 0 full of them and another
// account's jobs, which enter queue 0 later, wait behind the whole backlog.
// Slurm's priority/multifactor, which Lachesis replaces, stops that with its
// fair-share factor; FairShare restores it without giving up the queues:
//
//   - an account's usage is its attained GPU-service (GPU-seconds, the same
//     quantity the queues are built on), decayed with a half-life, like
//     Slurm's PriorityDecayHalfLife, so old usage is forgiven;
//   - its factor is Slurm's classic F = 2^(−U/S), with U its share of the
//     usage and S its share of the shares, both normalised over the accounts
//     that have jobs in the pass (an idle account's share is not held back
//     for it: the cluster stays work-conserving);
//   - inside one Tiresias queue, jobs of accounts at or below their share
//     (F ≥ ½) go before jobs of accounts above it. That is the first
//     tie-break after the queue, before the Gittins index and queue entry.
//
// Why a two-class tie-break rather than sorting by F: queues still decide
// first, so a long job never overtakes a short one because of its account
// and preemption (which follows the queues) is unchanged; and within a class
// the Gittins index and FIFO still order jobs, so fair share only decides
// between accounts that actually differ in how much of their share they use.
// An account over its share loses ties to every account under it until its
// decayed usage falls back to its share, which bounds how long a flooding
// account can keep others waiting: by the running jobs it already holds,
// never by its backlog.

// Fair-share bounds. Account names are copied from Slurm's job records on
// every pass, so they are bounded; the share table is an admin's list.
const (
	// MaxAccountName is the longest account name kept (longer names are
	// cut to this many bytes).
	MaxAccountName = 128
	// MaxShareEntries bounds fairshare.shares.
	MaxShareEntries = 10000
	// MaxShares bounds one account's shares, like Slurm's 32-bit
	// shares_raw.
	MaxShares = 1 << 31
	// MinHalfLife and MaxHalfLife bound fairshare.half_life (seconds): a
	// minute to ten years.
	MinHalfLife = 60
	MaxHalfLife = 10 * 365 * 24 * 3600
)

// overShareCut is the factor below which an account is over its share,
// with a little slack so that an account exactly at its share (F = ½ up to
// rounding) counts as at it, whatever the rounding did.
const overShareCut = 0.5 * (1 - 1e-9)

// FairShare configures fair share between accounts. It is part of Config so
// that one validated value drives the Ranker; the shares themselves are used
// by whoever builds the pass's Jobs (AccountShares).
type FairShare struct {
	// Enabled turns the tie-break on. Off, FairShare factors are still
	// recorded (for sprio) but never order jobs.
	Enabled bool
	// HalfLife is the usage decay half-life in seconds.
	HalfLife float64
	// Shares are per-account shares from lachesis.yaml, used for accounts
	// whose Slurm association gives none (no slurmdbd, or no shares set).
	Shares map[string]float64
	// DefaultShares is the shares of an account in neither. 0 (the
	// default): such an account is unknown and has no share, so its jobs
	// are in the lowest fair-share class (factor 0). Without Slurm's
	// AccountingStorageEnforce=associations any user may name any account
	// (`sbatch -A x$RANDOM`); were unknown accounts given shares, each new
	// name would arrive with no usage, hence the best factor, and add to
	// the shares every real account is measured against.
	DefaultShares float64
}

// DefaultFairShare is on, and only accounts with shares (slurmdbd's or
// fairshare.shares) have a share: with one such account (or none) every job
// is in one class and the order is exactly Tiresias's, so it costs nothing
// until a second account shows up.
func DefaultFairShare() FairShare {
	return FairShare{Enabled: true, HalfLife: 7 * 24 * 3600, DefaultShares: 0}
}

// Validate reports every problem at once; keys are relative to the
// fairshare section and each error wraps ErrInvalidConfig.
func (f FairShare) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, configerr.New(ErrInvalidConfig, key, format, args...))
	}
	if !(f.HalfLife >= MinHalfLife && f.HalfLife <= MaxHalfLife) {
		bad("half_life", "%v must be between %d and %d seconds", f.HalfLife, MinHalfLife, MaxHalfLife)
	}
	if !(f.DefaultShares == 0 || validShares(f.DefaultShares)) {
		bad("default_shares", "%v must be 0 (unknown accounts have no share) or a number > 0 and <= %d", f.DefaultShares, MaxShares)
	}
	if len(f.Shares) > MaxShareEntries {
		bad("shares", "%d accounts, at most %d allowed", len(f.Shares), MaxShareEntries)
	}
	names := make([]string, 0, len(f.Shares))
	for name := range f.Shares {
		names = append(names, name)
	}
	sort.Strings(names) // errors in a stable order
	for _, name := range names {
		switch {
		case name == "":
			bad("shares", "an account name must not be empty")
		case len(name) > MaxAccountName:
			bad("shares", "account name %.20q... is longer than %d bytes", name, MaxAccountName)
		case !validShares(f.Shares[name]):
			bad("shares."+name, "%v must be a number > 0 and <= %d", f.Shares[name], MaxShares)
		}
	}
	return errors.Join(errs...)
}

func validShares(v float64) bool { return v > 0 && v <= MaxShares }

// SharesOf is an account's shares: Slurm's association's when it has some
// (assocShares > 0), else the config's for that account, else the default
// (0 unless the admin set default_shares: an unknown account has none).
func (f *FairShare) SharesOf(account string, assocShares uint32) float64 {
	if assocShares > 0 {
		return float64(assocShares)
	}
	if s, ok := f.Shares[account]; ok {
		return s
	}
	return f.DefaultShares
}

// DecayUsage is usage after elapsed seconds of exponential decay with the
// given half-life. Negative or NaN elapsed time (a clock stepped back)
// decays nothing.
func DecayUsage(usage, elapsed, halfLife float64) float64 {
	if !(elapsed > 0) || !(halfLife > 0) {
		return usage
	}
	return usage * math.Exp2(-elapsed/halfLife)
}

// AccountLoad is one competing account in a pass: its shares and its
// decayed usage in GPU-seconds. Factor is filled by FairShareFactors.
type AccountLoad struct {
	Shares float64
	Usage  float64
	Factor float64
}

// FairShareFactors sets each account's factor F = 2^(−U/S), U and S being
// its fraction of the usage and of the shares over the accounts given.
// With no usage at all every account is at 1: nobody has used anything.
// An account with no valid shares (≤ 0, NaN) gets 0, the lowest class.
func FairShareFactors(loads []AccountLoad) {
	var usage, shares float64
	for i := range loads {
		if u := loads[i].Usage; u > 0 {
			usage += u
		}
		if s := loads[i].Shares; s > 0 {
			shares += s
		}
	}
	for i := range loads {
		l := &loads[i]
		switch {
		case !(l.Shares > 0):
			l.Factor = 0
		case !(usage > 0) || !(l.Usage > 0):
			l.Factor = 1
		default:
			l.Factor = math.Exp2(-(l.Usage / usage) / (l.Shares / shares))
		}
	}
}

// OverShare says a fair-share factor belongs to an account using more than
// its share (F < ½); NaN counts as over.
func OverShare(factor float64) bool { return !(factor >= overShareCut) }
