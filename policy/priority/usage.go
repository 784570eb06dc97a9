package priority

// ForgetUsage is the decayed usage (GPU-seconds) below which an account
// without jobs is dropped from a UsageTable, so the table stays as small as
// the set of accounts that matter. One GPU-second cannot change anyone's
// class.
const ForgetUsage = 1.0

// UsageTable is fair share's bookkeeping between passes: each account's
// decayed usage, and in each pass the accounts with jobs and their factors.
// slurmctld's core and the simulator both keep one, so the simulator's
// fair share is the core's, not a copy of it. A pass is
//
//	Decay(now); Charge(...) for the service each job attained since the
//	last pass; BeginPass(); Join(...) for every job to rank; Settle();
//	then each job's factor is Factor(the index Join returned).
//
// Not safe for concurrent use.
type UsageTable struct {
	accounts map[string]*usageEntry
	at       int64         // when usage was last decayed
	loads    []AccountLoad // the accounts with jobs this pass
	names    []string      // names[i] is loads[i]'s account
}

type usageEntry struct {
	usage float64 // GPU-seconds, decayed up to at
	load  int     // index into loads this pass; -1: no jobs
}

// AccountUsage is one account's decayed usage, as saved between runs.
type AccountUsage struct {
	Account string
	Usage   float64 // GPU-seconds, decayed up to UsageTable.At
}

func (t *UsageTable) init() {
	if t.accounts == nil {
		t.accounts = make(map[string]*usageEntry)
	}
}

// Restore puts back an account's usage saved at time at (seconds), before
// the first pass; the next Decay decays it from then, so a restart resets
// nobody's usage.
func (t *UsageTable) Restore(account string, usage float64, at int64) {
	if !(usage > 0) {
		return
	}
	t.init()
	t.accounts[account] = &usageEntry{usage: usage, load: -1}
	t.at = max(t.at, at)
}

// Decay brings every account's usage forward to now. A clock stepped back
// decays nothing.
func (t *UsageTable) Decay(now int64, halfLife float64) {
	t.init()
	if t.at != 0 && now > t.at {
		for _, a := range t.accounts {
			a.usage = DecayUsage(a.usage, float64(now-t.at), halfLife)
		}
	}
	t.at = max(t.at, now)
}

// Charge adds GPU-seconds of attained service to an account's usage;
// nothing for a non-positive amount (no refunds: usage decays anyway).
func (t *UsageTable) Charge(account string, gpuSeconds float64) {
	if !(gpuSeconds > 0) {
		return
	}
	t.init()
	a := t.accounts[account]
	if a == nil {
		a = &usageEntry{load: -1}
		t.accounts[account] = a
	}
	a.usage += gpuSeconds
}

// BeginPass starts a pass's set of accounts with jobs.
func (t *UsageTable) BeginPass() {
	t.init()
	for _, a := range t.accounts {
		a.load = -1
	}
	t.loads, t.names = t.loads[:0], t.names[:0]
}

// Join adds a job of account to the pass and returns its account's index
// in Loads. The account's shares are those given with its first job.
func (t *UsageTable) Join(account string, shares float64) int {
	a := t.accounts[account]
	if a == nil {
		a = &usageEntry{load: -1}
		t.accounts[account] = a
	}
	if a.load < 0 {
		a.load = len(t.loads)
		t.loads = append(t.loads, AccountLoad{Shares: shares, Usage: a.usage})
		t.names = append(t.names, account)
	}
	return a.load
}

// Settle sets the factors of the pass's accounts (FairShareFactors) and
// drops accounts without jobs whose usage fell below ForgetUsage.
func (t *UsageTable) Settle() {
	FairShareFactors(t.loads)
	for name, a := range t.accounts {
		if a.load < 0 && a.usage < ForgetUsage {
			delete(t.accounts, name)
		}
	}
}

// Loads are the pass's accounts with jobs, in the order they joined, with
// their factors once Settle ran; Name(i) is Loads()[i]'s account. Both are
// valid until the next BeginPass.
func (t *UsageTable) Loads() []AccountLoad { return t.loads }

// Name is the account of Loads()[i].
func (t *UsageTable) Name(i int) string { return t.names[i] }

// Factor is the factor of the account at index i of Loads.
func (t *UsageTable) Factor(i int) float64 { return t.loads[i].Factor }

// Usage is an account's decayed usage as of the last Decay or Charge and
// whether the table tracks it.
func (t *UsageTable) Usage(account string) (float64, bool) {
	a, ok := t.accounts[account]
	if !ok {
		return 0, false
	}
	return a.usage, true
}

// At is when usage was last decayed (seconds; 0 before any Decay).
func (t *UsageTable) At() int64 { return t.at }

// Len is the number of accounts tracked: with jobs, or with usage left.
func (t *UsageTable) Len() int { return len(t.accounts) }

// AppendUsage appends every tracked account's usage to dst, in no
// particular order.
func (t *UsageTable) AppendUsage(dst []AccountUsage) []AccountUsage {
	for name, a := range t.accounts {
		dst = append(dst, AccountUsage{Account: name, Usage: a.usage})
	}
	return dst
}
