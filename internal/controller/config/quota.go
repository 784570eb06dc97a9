package config

import (
	"fmt"
	"math"
	"strings"
	"time"

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
	// Source is where the accounts' quotas come from: QuotaFromYAML
	// (Accounts above) or QuotaFromSlurmdbd (each account's Description
	// in slurmdbd, read by the core; Accounts is then empty here).
	Source string
	// Refresh is how often the core reads slurmdbd's quotas again.
	Refresh time.Duration
}

// Where quotas come from (quota.source).
const (
	QuotaFromYAML     = "yaml"
	QuotaFromSlurmdbd = "slurmdbd"
)

// Bounds of quota.refresh, in seconds: slurmdbd is not asked more often
// than every 30 s, and a day is the longest an edit may wait.
const (
	MinQuotaRefresh     = 30
	MaxQuotaRefresh     = 86400
	DefaultQuotaRefresh = 300 * time.Second
)

// quotaFile is the quota section's YAML layout.
type quotaFile struct {
	MaxReclaimPerPass int               `mapstructure:"max_reclaim_per_pass"`
	Accounts          map[string]string `mapstructure:"accounts"`
	Source            string            `mapstructure:"source"`
	Refresh           float64           `mapstructure:"refresh"`
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
	q.Source = strings.ToLower(strings.TrimSpace(q.Source))
	switch q.Source {
	case QuotaFromYAML:
	case QuotaFromSlurmdbd:
		if len(q.Accounts) > 0 {
			return fmt.Errorf("%w: quota.source is %s, so the quotas are read from each account's Description in slurmdbd (%s=...); quota.accounts must be empty, it names %d accounts",
				ErrInvalid, QuotaFromSlurmdbd, quota.Marker, len(q.Accounts))
		}
	default:
		return fmt.Errorf("%w: quota.source must be %s or %s, got %q", ErrInvalid, QuotaFromYAML, QuotaFromSlurmdbd, q.Source)
	}
	if math.IsNaN(q.Refresh) || q.Refresh < MinQuotaRefresh || q.Refresh > MaxQuotaRefresh {
		return fmt.Errorf("%w: quota.refresh must be between %d and %d seconds, got %v", ErrInvalid, MinQuotaRefresh, MaxQuotaRefresh, q.Refresh)
	}
	c.Quota = Quota{Accounts: make(map[string]quota.Spec, len(q.Accounts)), MaxReclaimPerPass: q.MaxReclaimPerPass,
		Source: q.Source, Refresh: time.Duration(q.Refresh * float64(time.Second))}
	for name, text := range q.Accounts {
		acct, err := quota.AccountName(name)
		if err != nil {
			return fmt.Errorf("%w: quota.accounts: %w", ErrInvalid, err)
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
