package core

import (
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/priority"
)

// Fair share between accounts: the core's bookkeeping. The rule itself is
// priority's (priority/fairshare.go); here each account's usage is fed from
// what the pass already accounts per job (the growth of each job's
// attained service), decayed, persisted, and turned into the factor every
// job of the account carries into the ranker.

const (
	keyAccount   = "account"
	keyUsage     = "usage_gpu_s"
	keyFactor    = "fairshare"
	keyOverShare = "over_share"
)

// forgetUsage is the decayed usage (GPU-seconds) below which an account
// without jobs is dropped, so the table stays as small as the set of
// accounts that matter. One GPU-second cannot change anyone's class.
const forgetUsage = 1.0

// maxInterned bounds the names table: account names come from jobs, and a
// site with more distinct accounts than this still works, only paying an
// allocation per job and pass for the names beyond it.
const maxInterned = 4096

// AccountNames interns account names copied from C, so that a pass over
// ten thousand jobs of a few accounts allocates nothing for their names.
// Safe for concurrent use: passes and placements come from different
// slurmctld threads.
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

// accountUsage is one account's decayed usage.
type accountUsage struct {
	usage float64 // GPU-seconds, decayed up to the last pass
	load  int     // index into fairShareState.loads this pass; -1: no jobs
}

// fairShareState is the core's fair-share table; under Core.mu.
type fairShareState struct {
	accounts map[string]*accountUsage
	at       int64                  // when usage was last decayed
	loads    []priority.AccountLoad // scratch: the accounts with jobs this pass
	jobLoad  []int                  // scratch: c.jobs[k]'s index into loads
	factor   map[string]float64     // each account's factor as of the last pass, for Place
	next     map[string]float64     // scratch: this pass's factors, swapped into factor
	saved    []ledger.AccountUsage  // scratch handed to the writer
}

func (f *fairShareState) init() {
	if f.accounts == nil {
		f.accounts = make(map[string]*accountUsage)
		f.factor = make(map[string]float64)
		f.next = make(map[string]float64)
	}
}

// restore loads the usage saved before a restart, decaying it from when it
// was saved, so a slurmctld restart resets nobody's usage.
func (f *fairShareState) restore(saved []ledger.AccountUsage) {
	f.init()
	for _, u := range saved {
		if u.Usage > 0 {
			f.accounts[u.Account] = &accountUsage{usage: u.Usage, load: -1}
			f.at = max(f.at, u.At)
		}
	}
}

// decay brings every account's usage forward to now.
func (f *fairShareState) decay(now int64, halfLife float64) {
	f.init()
	if f.at != 0 && now > f.at {
		for _, a := range f.accounts {
			a.usage = priority.DecayUsage(a.usage, float64(now-f.at), halfLife)
		}
	}
	f.at = max(f.at, now)
}

// charge adds GPU-seconds of attained service to an account.
func (f *fairShareState) charge(account string, gpuSeconds float64) {
	if !(gpuSeconds > 0) {
		return
	}
	f.init()
	a := f.accounts[account]
	if a == nil {
		a = &accountUsage{load: -1}
		f.accounts[account] = a
	}
	a.usage += gpuSeconds
}

// fairShare is a pass's stage between account and rank: it gives every job
// to rank its account's factor among the accounts with jobs in this pass.
func (c *Core) fairShare(snaps []Snapshot) {
	fs := &c.fs
	fs.init()
	cfg := &c.cfg.Tiresias.FairShare
	for _, a := range fs.accounts {
		a.load = -1
	}
	fs.loads = fs.loads[:0]
	fs.jobLoad = fs.jobLoad[:0]
	for k := range c.jobs {
		s := &snaps[c.jobIndex[k]]
		a := fs.accounts[s.Account]
		if a == nil {
			a = &accountUsage{load: -1}
			fs.accounts[s.Account] = a
		}
		if a.load < 0 {
			a.load = len(fs.loads)
			fs.loads = append(fs.loads, priority.AccountLoad{
				Shares: cfg.SharesOf(s.Account, s.AccountShares), Usage: a.usage,
			})
		}
		fs.jobLoad = append(fs.jobLoad, a.load)
	}
	priority.FairShareFactors(fs.loads)
	for k := range c.jobs {
		c.jobs[k].FairShare = fs.loads[fs.jobLoad[k]].Factor
	}
	clear(fs.next)
	for name, a := range fs.accounts {
		switch {
		case a.load >= 0:
			l := fs.loads[a.load]
			// One line when an account crosses its share, not one per pass.
			if before, ok := fs.factor[name]; !ok || priority.OverShare(before) != priority.OverShare(l.Factor) {
				c.log.Info("account fair-share class", keyAccount, name, keyFactor, l.Factor,
					keyUsage, a.usage, keyOverShare, priority.OverShare(l.Factor))
			}
			fs.next[name] = l.Factor
		case a.usage < forgetUsage:
			delete(fs.accounts, name)
		}
	}
	fs.factor, fs.next = fs.next, fs.factor
	c.met.fairShare(len(fs.accounts), len(fs.loads), countOver(fs.loads))
	c.queueUsage()
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

// placeFactor is the factor Place gives a job between passes: its
// account's as of the last pass; an account the last pass did not see has
// had no jobs waiting or running, so it counts as unused.
func (c *Core) placeFactor(account string) float64 {
	if f, ok := c.fs.factor[account]; ok {
		return f
	}
	return 1
}

// queueUsage hands the table to the writer (writer.go), which saves the
// latest one it finds.
func (c *Core) queueUsage() {
	fs := &c.fs
	fs.saved = fs.saved[:0]
	for name, a := range fs.accounts {
		fs.saved = append(fs.saved, ledger.AccountUsage{Account: name, Usage: a.usage, At: fs.at})
	}
	c.pendMu.Lock()
	c.pendUsage = append(c.pendUsage[:0], fs.saved...)
	c.usageDirty = true
	c.pendMu.Unlock()
}

// AccountUsage returns an account's decayed usage as of the last pass and
// whether the core tracks it (tests and tools).
func (c *Core) AccountUsage(account string) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.fs.accounts[account]
	if !ok {
		return 0, false
	}
	return a.usage, true
}
