package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Fair share between accounts in the simulator: a job's account is its
// trace's virtual cluster (Job.Cluster: Philly's `cluster` column), and the
// bookkeeping is priority.UsageTable, the table slurmctld's core keeps, fed
// the way the core feeds it: at every pass, usage decays to the pass's time,
// each job's account is charged the service the job attained since the last
// pass (a job that completed in between is charged its last run at this
// pass, as the core charges a job it sees finished), and the factors among
// the accounts with jobs in the pass go to priority.Ranker with the jobs.

// fairShare is one run's fair-share state; nil when fair share is off.
type fairShare struct {
	cfg   priority.FairShare
	table priority.UsageTable
	// done are the completed jobs' service not charged yet, charged at the
	// next pass.
	done []charge
	load []int // scratch: the pass's jobs' indices into table.Loads()
}

type charge struct {
	account    string
	gpuSeconds float64
}

// pass charges usage and sets pjs[i].FairShare for jobs[i].
func (f *fairShare) pass(now int64, jobs []*JobState, pjs []priority.Job) {
	f.table.Decay(now, f.cfg.HalfLife)
	for _, c := range f.done {
		f.table.Charge(c.account, c.gpuSeconds)
	}
	f.done = f.done[:0]
	for _, j := range jobs {
		f.chargeGrowth(j)
	}
	f.table.BeginPass()
	f.load = f.load[:0]
	for _, j := range jobs {
		f.load = append(f.load, f.table.Join(j.Job.Cluster, f.cfg.SharesOf(j.Job.Cluster, 0)))
	}
	f.table.Settle()
	for i := range pjs {
		pjs[i].FairShare = f.table.Factor(f.load[i])
	}
}

// chargeGrowth charges j's account the service j attained since it was
// last charged (j.Account is up to date: the orderer or the engine closed
// or observed its run).
func (f *fairShare) chargeGrowth(j *JobState) {
	total := j.Account.Total()
	if grown := total - j.charged; grown > 0 {
		f.table.Charge(j.Job.Cluster, grown)
	}
	j.charged = math.Max(j.charged, total)
}

// finished keeps a completed job's last service for the next pass.
func (f *fairShare) finished(j *JobState) {
	total := j.Account.Total()
	if grown := total - j.charged; grown > 0 {
		f.done = append(f.done, charge{j.Job.Cluster, grown})
	}
	j.charged = math.Max(j.charged, total)
}

// ParseShares reads per-account shares written "account=shares,...": the
// simulator's stand-in for lachesis.yaml's fairshare.shares (or slurmdbd's
// associations). Every account named once, each share a positive number.
func ParseShares(s string) (map[string]float64, error) {
	out := map[string]float64{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, field := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(field), "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: %q is not account=shares", ErrBadShares, field)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: account %q named twice", ErrBadShares, name)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: account %q: shares %q must be a positive number", ErrBadShares, name, val)
		}
		out[name] = v
	}
	return out, nil
}

// ErrBadShares: a -fairshare-shares list that ParseShares cannot read.
var ErrBadShares = errors.New("bad fair-share shares")
