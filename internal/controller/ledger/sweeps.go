package ledger

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Sweeps (policy/priority/siblings.go) are kept in the core's memory; what a
// restart needs to rebuild them is each ended member's sweep key, first
// submit time and GPU-time. The completed-job history holds the GPU-time;
// these columns, added to ledgers made before sweeps existed, hold the
// rest. Rows with in_sweep 0 (written before, or by a job the core never
// placed in a sweep) are not replayed.
var sweepColumns = []string{
	`ALTER TABLE completed ADD COLUMN in_sweep INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE completed ADD COLUMN sweep_user INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE completed ADD COLUMN sweep_account TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE completed ADD COLUMN sweep_gpus INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE completed ADD COLUMN first_submit INTEGER NOT NULL DEFAULT 0`,
	// Later: the key's partition, and whether the end is a sample (the job
	// completed); rows from before were all samples, of keys without one.
	`ALTER TABLE completed ADD COLUMN sweep_partition TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE completed ADD COLUMN sweep_sample INTEGER NOT NULL DEFAULT 1`,
}

// SweepEnd is one ended member of a sweep, as the completed-job history
// keeps it.
type SweepEnd struct {
	JobID       uint32
	Key         priority.SiblingKey
	FirstSubmit int64
	GPUSeconds  float64
	// Sample: the member completed, so its GPU-time is a sample for its
	// sweep (priority.Siblings.Done); else it only ends its membership.
	Sample bool
}

// SweepLister is implemented by stores that keep sweep keys with the
// completed-job history; the core asks for it with a type assertion, as
// for FinishedLister.
type SweepLister interface {
	SweepEnds(limit int) ([]SweepEnd, error)
}

var _ SweepLister = (*SQLite)(nil)

// SweepEnds returns up to limit most recently finished sweep members,
// oldest submission first: the order in which replaying them rebuilds the
// sweeps they belonged to.
func (s *SQLite) SweepEnds(limit int) ([]SweepEnd, error) {
	rows, err := s.conn().Query(`SELECT job_id, sweep_user, sweep_account, sweep_gpus, sweep_partition, first_submit,
		gpu_seconds, sweep_sample FROM completed WHERE in_sweep != 0 ORDER BY finished DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: list sweep members: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []SweepEnd
	for rows.Next() {
		var e SweepEnd
		if err := rows.Scan(&e.JobID, &e.Key.User, &e.Key.Account, &e.Key.GPUs, &e.Key.Partition, &e.FirstSubmit,
			&e.GPUSeconds, &e.Sample); err != nil {
			return nil, fmt.Errorf("%w: scan sweep member: %v", ErrStore, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: list sweep members: %v", ErrStore, err)
	}
	slices.SortStableFunc(out, func(a, b SweepEnd) int { return cmp.Compare(a.FirstSubmit, b.FirstSubmit) })
	return out, nil
}
