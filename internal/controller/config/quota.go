package config

import (
	"fmt"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/quota"
)

// Quota configures guaranteed GPU quotas in affinity cells (issue 35;
// the rules are policy/quota and policy/cells). The texts are checked
// here; whether the cells exist in the cluster is checked against its
// real shape (quota.Bind on the nodes' cell tree) wherever the cluster is
// known, and that error names the same key.
type Quota struct {
	// Accounts is each account's quota (lower-cased names, as Slurm's).
	// Accounts not named have none and keep fair share.
	Accounts map[string]quota.Spec
	// MaxReclaimPerPass bounds the jobs all reclaims of one pass evict.
	MaxReclaimPerPass int
}

// quotaFile is the quota section's YAML layout.
type quotaFile struct {
	MaxReclaimPerPass int               `mapstructure:"max_reclaim_per_pass"`
	Accounts          map[string]string `mapstructure:"accounts"`
}

// checkQuota checks the quota section and fills c.Quota.
func (f file) checkQuota(c *Config) error {
	q := f.Quota
	if q.MaxReclaimPerPass < 1 || q.MaxReclaimPerPass > quota.MaxReclaimPerPass {
		return fmt.Errorf("%w: quota.max_reclaim_per_pass must be between 1 and %d, got %d", ErrInvalid, quota.MaxReclaimPerPass, q.MaxReclaimPerPass)
	}
	if len(q.Accounts) > quota.MaxAccounts {
		return fmt.Errorf("%w: quota.accounts names %d accounts, at most %d", ErrInvalid, len(q.Accounts), quota.MaxAccounts)
	}
	c.Quota = Quota{Accounts: make(map[string]quota.Spec, len(q.Accounts)), MaxReclaimPerPass: q.MaxReclaimPerPass}
	for name, text := range q.Accounts {
		acct := strings.ToLower(name)
		if acct == "" || len(acct) > quota.MaxAccountLen || strings.ContainsAny(acct, " ,\t\n") {
			return fmt.Errorf("%w: quota.accounts: %q is not an account name (1 to %d bytes, no spaces or commas)", ErrInvalid, name, quota.MaxAccountLen)
		}
		if _, dup := c.Quota.Accounts[acct]; dup {
			return fmt.Errorf("%w: quota.accounts.%s is named twice (account names are case-insensitive)", ErrInvalid, acct)
		}
		spec, err := quota.Parse(text)
		if err != nil {
			return fmt.Errorf("%w: quota.accounts.%s: %w", ErrInvalid, acct, err)
		}
		c.Quota.Accounts[acct] = spec
	}
	return nil
}
