package core

import (
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Fair share between accounts: the core's bookkeeping. The rule itself is
// priority's (policy/priority/fairshare.go); here each account's usage is fed from
// what the pass already accounts per job (the growth of each job's
// attained service), decayed, persisted, and turned into the factor every
// job of the account carries into the ranker.

const (
	keyAccount   = "account"
	keyShares    = "shares"
	keyUsage     = "usage_gpu_s"
	keyFactor    = "fairshare"
	keyOverShare = "over_share"
)

// maxInterned bounds the names table: account names come from jobs, and a
// site with more distinct accounts than this still works, only paying an
// allocation per job and pass for the names beyond it.
const maxInterned = 4096

// AccountNames interns account names copied from C, so that a pass over
// ten thousand jobs of a few accounts allocates nothing for their names.
// Safe for concurrent use: passes and placements come from different
// slurmctld threads. Its mu is a leaf, apart from Core's locks: Intern
// takes no other lock while it holds it.
type AccountNames struct {
	mu sync.Mutex
	m  map[string]string
}

// Intern returns b as a string, the same string for the same bytes, cut to
// priority.MaxAccountName bytes.
func (n *AccountNames) Intern(b []byte) string {
	if len(b) > priority.MaxAccountName {
		b = b[:priority.MaxAccountName]
	}
	if len(b) == 0 {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.m[string(b)]; ok { // no allocation: the compiler looks up b in place
		return s
	}
	s := string(b)
	if n.m == nil {
		n.m = make(map[string]string)
	}
	if len(n.m) < maxInterned {
		n.m[s] = s
	}
	return s
}

// fairShareState is the core's fair-share table; under Core.mu. The usage
// bookkeeping is priority.UsageTable's, the simulator's too; what is the
// core's own is the log, the factors Enqueue needs between passes and the
// hand-off to the ledger writer.
type fairShareState struct {
	table   priority.UsageTable
	jobLoad []int              // scratch: c.jobs[k]'s index into table.Loads()
	factor  map[string]float64 // each account's factor as of the last pass, for Enqueue
	next    map[string]float64 // scratch: this pass's factors, swapped into factor
	usage   []priority.AccountUsage
	saved   []ledger.AccountUsage // scratch handed to the writer
}

func (f *fairShareState) init() {
	if f.factor == nil {
		f.factor = make(map[string]float64)
		f.next = make(map[string]float64)
	}
}

// restore loads the usage saved before a restart, decaying it from when it
// was saved, so a slurmctld restart resets nobody's usage.
func (f *fairShareState) restore(saved []ledger.AccountUsage) {
	f.init()
	for _, u := range saved {
		f.table.Restore(u.Account, u.Usage, u.At)
	}
}

// decay brings every account's usage forward to now.
func (f *fairShareState) decay(now int64, halfLife float64) {
	f.table.Decay(now, halfLife)
}

// fairShare is a pass's second stage, between account and rank: it gives
// every job to rank its account's factor among the accounts with jobs in
// this pass.
func (c *Core) fairShare(snaps []Snapshot) {
	fs := &c.fs
	fs.init()
	cfg := &c.cfg.Tiresias.FairShare
	fs.table.BeginPass()
	fs.jobLoad = fs.jobLoad[:0]
	for k := range c.jobs {
		s := &snaps[c.jobIndex[k]]
		fs.jobLoad = append(fs.jobLoad, fs.table.Join(s.Account, cfg.SharesOf(s.Account, s.AccountShares)))
	}
	fs.table.Settle()
	for k := range c.jobs {
		c.jobs[k].FairShare = fs.table.Factor(fs.jobLoad[k])
	}
	clear(fs.next)
	loads := fs.table.Loads()
	for i, l := range loads {
		name := fs.table.Name(i)
		usage, _ := fs.table.Usage(name)
		// One line when an account crosses its share, not one per pass.
		if before, ok := fs.factor[name]; !ok || priority.OverShare(before) != priority.OverShare(l.Factor) {
			// The shares say where they came from: the association's
			// shares_raw when slurmdbd gives one, else lachesis.yaml.
			if !(l.Shares > 0) {
				c.log.Info("account without fair-share shares (none from slurmdbd, not in fairshare.shares, default_shares 0): lowest class",
					keyAccount, name, keyShares, l.Shares, keyFactor, l.Factor, keyUsage, usage, keyOverShare, true)
			} else {
				c.log.Info("account fair-share class", keyAccount, name, keyShares, l.Shares, keyFactor, l.Factor,
					keyUsage, usage, keyOverShare, priority.OverShare(l.Factor))
			}
		}
		fs.next[name] = l.Factor
	}
	fs.factor, fs.next = fs.next, fs.factor
	c.met.fairShare(fs.table.Len(), len(loads), countOver(loads))
	c.queueAccountUsage()
}

func countOver(loads []priority.AccountLoad) int {
	n := 0
	for i := range loads {
		if priority.OverShare(loads[i].Factor) {
			n++
		}
	}
	return n
}

// enqueueFactor is the factor Enqueue gives a job between passes: its
// account's as of the last pass; an account the last pass did not see has
// had no jobs waiting or running, so it counts as unused if it has shares,
// and as having none (0, the lowest class) if it has not, as the next pass
// will find.
func (c *Core) enqueueFactor(account string, shares float64) float64 {
	if f, ok := c.fs.factor[account]; ok {
		return f
	}
	if !(shares > 0) {
		return 0
	}
	return 1
}

// queueAccountUsage hands the table to the writer (writer.go), which saves the
// latest one it finds.
func (c *Core) queueAccountUsage() {
	fs := &c.fs
	fs.usage = fs.table.AppendUsage(fs.usage[:0])
	fs.saved = fs.saved[:0]
	at := fs.table.At()
	for _, u := range fs.usage {
		fs.saved = append(fs.saved, ledger.AccountUsage{Account: u.Account, Usage: u.Usage, At: at})
	}
	c.pendMu.Lock()
	c.pendAccountUsage = append(c.pendAccountUsage[:0], fs.saved...)
	c.accountUsageDirty = true
	c.pendMu.Unlock()
}

// AccountUsage returns an account's decayed usage as of the last pass and
// whether the core tracks it (tests and tools).
func (c *Core) AccountUsage(account string) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fs.table.Usage(account)
}
