package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// Quotas read from slurmdbd (issue 35 item 1; quota.source: slurmdbd).
// Each account's quota is a marker in its Description in slurmdbd
// (quota.InDescription), which only Slurm's admins and operators may
// modify (docs/security.md). A goroutine of its own reads every account's
// description with sacctmgr through internal/slurmcmd, never under
// slurmctld's locks nor the core's, so a slow or absent slurmdbd never
// holds a pass: at start, at every reconfigure and every quota.refresh.
// What it read is bound to the cluster's real shape (bindQuotas, the
// node table the plugin sent) under the core's lock and becomes the
// quotas in force, c.cfg.Quota.Accounts, which the pass's quota stages
// read as they read lachesis.yaml's. Anything wrong is logged once per
// read, naming the account and the field, and never fatal (the data
// arrives after start): sacctmgr failing, or quotas the cluster cannot
// hold, keep the quotas in force; a description whose quota is refused
// keeps that account's quota in force (none if it had none), the other
// accounts' are read. Read before the plugin sent the node table, the
// quotas wait for it.
//
// Only a top-level account's description counts: one whose association
// in this cluster has parent root. slurmdbd lets an account coordinator
// add accounts, description included, under an account they coordinate
// (as_mysql_add_accts, as_mysql_add_assocs), never under root unless an
// admin made them a coordinator of root; so a marker on a sub-account is
// refused (errNotTopLevel), however the site set DisableCoordDBD.

// Bounds and pauses of the slurmdbd source.
const (
	// maxQuotaErrorsLogged bounds the log lines one read writes about bad
	// descriptions; the rest are counted in one more line.
	maxQuotaErrorsLogged = 8
	// quotaNodesWait is how often quotas read before the node table try
	// to bind again (no new sacctmgr).
	quotaNodesWait = time.Second
	// sacctmgrTimeout bounds one read.
	sacctmgrTimeout = 20 * time.Second
)

// Failure reasons of lachesis_quota_source_failures_total.
const (
	quotaFailRead = "read" // sacctmgr failed or its answer was not trusted
	quotaFailText = "text" // a description's quota was refused
	quotaFailFit  = "fit"  // the quotas do not fit the cluster
)

// Metric names of the quota source.
const (
	MetricQuotaSourceRead     = "lachesis_quota_source_read_timestamp_seconds"
	MetricQuotaSourceFailures = "lachesis_quota_source_failures_total"
)

// accountLister lists slurmdbd's accounts, their descriptions, and each
// account's parent in a cluster.
type accountLister interface {
	AccountDescriptions(ctx context.Context) ([]slurmcmd.AccountDescription, error)
	AccountParents(ctx context.Context, cluster string) (map[string]string, error)
}

var _ accountLister = slurmcmd.Runner{}

// quotaSourceState is the slurmdbd source between reads.
type quotaSourceState struct {
	// kick asks the goroutine for a read now (reconfigure); nil until
	// Open starts it.
	kick chan struct{}
	// waiting: quotas read before the node table, bound once it comes;
	// under mu.
	waiting map[string]quota.Spec
	// readAt and failures: the source's metrics (registered only when
	// metrics.listen is set).
	readAt   *prometheus.GaugeVec
	failures *prometheus.CounterVec
}

func newQuotaSource() quotaSourceState {
	return quotaSourceState{
		readAt: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricQuotaSourceRead,
			Help: "Unix time the quotas in force were last read, labelled with the source in use (yaml: lachesis.yaml at start or reconfigure; slurmdbd: the accounts' descriptions, bound to the cluster). One series.",
		}, []string{"source"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricQuotaSourceFailures,
			Help: "Reads of slurmdbd's quotas that kept the quotas in force, by reason: read (sacctmgr failed), text (a description's quota refused), fit (the quotas do not fit the cluster).",
		}, []string{"reason"}),
	}
}

func (s *quotaSourceState) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.readAt, s.failures}
}

// read marks the quotas in force as read from source now.
func (s *quotaSourceState) read(source string, now time.Time) {
	s.readAt.Reset()
	s.readAt.WithLabelValues(source).Set(float64(now.Unix()))
}

// kickQuotaSource asks for a read of slurmdbd's quotas now, without
// waiting (reconfigure).
func (c *Core) kickQuotaSource() {
	select {
	case c.quotaSource.kick <- struct{}{}:
	default: // one is asked for already, or no goroutine (tests)
	}
}

// runQuotaSource is the source's goroutine: a read at once, then at each
// kick and every quota.refresh, until stop.
func (c *Core) runQuotaSource(stop <-chan struct{}, dbd accountLister) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	timer := time.NewTimer(0) // the read at start
	defer timer.Stop()
	for started := false; ; started = true {
		fresh := true
		select {
		case <-stop:
			return
		case <-c.quotaSource.kick:
		case <-timer.C:
			fresh = !started
		}
		timer.Reset(c.refreshQuotas(ctx, dbd, fresh))
	}
}

// refreshQuotas reads slurmdbd's quotas (or, when quotas read earlier
// still wait for the node table and fresh is false, binds those) and
// returns when to come back. With quota.source yaml it only marks
// lachesis.yaml as the source.
func (c *Core) refreshQuotas(ctx context.Context, dbd accountLister, fresh bool) time.Duration {
	c.mu.Lock()
	source, every, specs := c.cfg.Quota.Source, c.cfg.Quota.Refresh, c.quotaSource.waiting
	c.mu.Unlock()
	if source != config.QuotaFromSlurmdbd {
		if fresh {
			c.quotaSource.read(source, time.Now())
		}
		return every
	}
	var refused []string
	if specs == nil || fresh {
		var ok bool
		if specs, refused, ok = c.readSlurmdbdQuotas(ctx, dbd); !ok {
			return every
		}
	}
	if waiting := c.bindSlurmdbdQuotas(specs, refused); waiting {
		return quotaNodesWait
	}
	return every
}

// readSlurmdbdQuotas reads every account's quota from its description:
// the quotas read, and the accounts whose description was refused (each
// logged here, naming the account and the field, and counted); ok is
// false when nothing could be read.
func (c *Core) readSlurmdbdQuotas(ctx context.Context, dbd accountLister) (specs map[string]quota.Spec, refused []string, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, sacctmgrTimeout)
	defer cancel()
	accts, err := dbd.AccountDescriptions(ctx)
	if err != nil {
		c.quotaSource.failures.WithLabelValues(quotaFailRead).Inc()
		c.log.Error("quotas not read from slurmdbd, keeping the quotas in force", keySource, config.QuotaFromSlurmdbd, keyErr, err)
		return nil, nil, false
	}
	var parents map[string]string
	if slices.ContainsFunc(accts, func(a slurmcmd.AccountDescription) bool {
		_, found, _ := quota.InDescription(a.Description)
		return found
	}) {
		if parents, err = dbd.AccountParents(ctx, c.env.ClusterName); err != nil {
			c.quotaSource.failures.WithLabelValues(quotaFailRead).Inc()
			c.log.Error("quotas not read from slurmdbd (the accounts' parents), keeping the quotas in force", keySource, config.QuotaFromSlurmdbd, keyErr, err)
			return nil, nil, false
		}
	}
	specs, refused, errs := quotasInDescriptions(accts, parents, c.env.ClusterName)
	if len(errs) > 0 {
		c.quotaSource.failures.WithLabelValues(quotaFailText).Inc()
		for i, err := range errs {
			if i == maxQuotaErrorsLogged {
				c.log.Error("more slurmdbd quotas refused", keySource, config.QuotaFromSlurmdbd, "more", len(errs)-i)
				break
			}
			c.log.Error("slurmdbd quota refused, the account keeps the quota in force", keySource, config.QuotaFromSlurmdbd, keyErr, err)
		}
	}
	return specs, refused, true
}

// errNotTopLevel refuses a quota on an account whose parent in this
// cluster is not root.
var errNotTopLevel = errors.New("not a top-level account: a coordinator of its parent could have created it")

// quotasInDescriptions is each account's quota in its description: the
// accounts whose description holds the marker and whose parent in
// cluster (parents, by lower-case name) is root, at most
// quota.MaxAccounts; refused lists the accounts (lower case) whose marker
// was refused, each error naming the account and the field.
func quotasInDescriptions(accts []slurmcmd.AccountDescription, parents map[string]string, cluster string) (specs map[string]quota.Spec, refused []string, errs []error) {
	specs = map[string]quota.Spec{}
	for _, a := range accts {
		spec, found, err := quota.InDescription(a.Description)
		if !found {
			continue
		}
		name, nameErr := quota.AccountName(a.Name)
		switch {
		case nameErr != nil:
			err = nameErr
		case err == nil && parents[name] != "root":
			err = notTopLevel(parents, name, cluster)
		case err == nil && len(specs) == quota.MaxAccounts:
			err = fmt.Errorf("%w: more than %d accounts hold a quota", quota.ErrBadQuota, quota.MaxAccounts)
		}
		if err != nil {
			refused = append(refused, strings.ToLower(a.Name))
			errs = append(errs, fmt.Errorf("slurmdbd account %s Description %s: %w", a.Name, quota.Marker, err))
			continue
		}
		specs[name] = spec
	}
	return specs, refused, errs
}

// notTopLevel says why account's quota is refused: its parent in
// cluster, or that it has no association there.
func notTopLevel(parents map[string]string, account, cluster string) error {
	parent, ok := parents[account]
	switch {
	case !ok:
		return fmt.Errorf("no association in cluster %s: %w", cluster, errNotTopLevel)
	case parent == "":
		return fmt.Errorf("the root of cluster %s: %w", cluster, errNotTopLevel)
	}
	return fmt.Errorf("parent %s in cluster %s: %w", parent, cluster, errNotTopLevel)
}

// bindSlurmdbdQuotas makes specs, and the quotas in force of the refused
// accounts, the quotas in force if they fit the cluster; waiting is true when the node table has not come yet (they
// wait for it). A misfit is logged naming the account and the field, and
// the quotas in force stay.
func (c *Core) bindSlurmdbdQuotas(specs map[string]quota.Spec, refused []string) (waiting bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.quotaSource.waiting = nil
	if c.cfg.Quota.Source != config.QuotaFromSlurmdbd {
		return false // a reconfigure changed the source meanwhile
	}
	// An account whose description was refused keeps the quota in force
	// (none if it had none): one lab's typo changes nothing, and holds
	// back no other account's edit.
	for _, a := range refused {
		if s, ok := c.cfg.Quota.Accounts[a]; ok {
			specs[a] = s
		}
	}
	if c.cluster.nodes == nil {
		c.quotaSource.waiting = specs
		return true
	}
	q := c.cfg.Quota
	q.Accounts = specs
	b, err := bindQuotas(c.configPath, q, c.cluster.nodes, c.topo.leaves)
	if err != nil {
		c.quotaSource.failures.WithLabelValues(quotaFailFit).Inc()
		c.log.Error("slurmdbd quotas do not fit the cluster, keeping the quotas in force", keySource, config.QuotaFromSlurmdbd, keyErr, slurmdbdFitError(err))
		return false
	}
	changed := !maps.Equal(c.cfg.Quota.Accounts, specs)
	wasOn := c.quotasOn()
	old := c.cfg.Quota.Accounts
	c.cfg.Quota.Accounts = specs // replaced, never edited: copies of the config share maps
	if wasOn != c.quotasOn() {
		if err := c.rebuildRanker(); err != nil {
			c.cfg.Quota.Accounts = old
			c.log.Error("slurmdbd quotas not applied, keeping the quotas in force", keySource, config.QuotaFromSlurmdbd, keyErr, err)
			return false
		}
	}
	c.cluster.binding = b
	c.cluster.refused, c.cluster.refusedErr = nil, nil // judged by the old quotas
	c.quotaSource.read(config.QuotaFromSlurmdbd, time.Now())
	level := c.log.Debug
	if changed {
		level = c.log.Info
	}
	level("quotas read from slurmdbd", keySource, config.QuotaFromSlurmdbd, "accounts", len(specs), "changed", changed, "quotas", formatQuotas(specs))
	return false
}

// slurmdbdFitError names the account whose quota does not fit as an
// admin finds it: its Description in slurmdbd, not lachesis.yaml's key.
func slurmdbdFitError(err error) error {
	var ae *quota.AccountError
	if errors.As(err, &ae) {
		return fmt.Errorf("slurmdbd account %s Description %s: %s does not fit the cluster: %s", ae.Account, quota.Marker, ae.Spec, ae.Why)
	}
	return fmt.Errorf("slurmdbd quotas: %w", err)
}

// carrySlurmdbdQuotas keeps the quotas read from slurmdbd in a reloaded
// config that still reads them there (its file has none): they stay in
// force until the read the reconfigure asks for. Caller holds mu.
func (c *Core) carrySlurmdbdQuotas(cfg *config.Config) {
	if cfg.Quota.Source == config.QuotaFromSlurmdbd && c.cfg.Quota.Source == config.QuotaFromSlurmdbd {
		cfg.Quota.Accounts = c.cfg.Quota.Accounts
	}
}

// formatQuotas is specs for one log line, accounts by name, bounded.
func formatQuotas(specs map[string]quota.Spec) string {
	const most = 16
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(specs)) {
		if len(parts) == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(specs)-most))
			break
		}
		parts = append(parts, a+"="+specs[a].String())
	}
	return fmt.Sprint(parts)
}
