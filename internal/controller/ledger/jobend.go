package ledger

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

// Slurm 22.05 sets a job's end time when slurmctld receives the node's
// completion message, which carries no time of its own; after a controller
// outage the end is therefore the restart, and the completed-job history
// (the Gittins distribution's input) would charge the whole outage. The
// node knows the true end (slurmstepd's SPANK task_exit runs then); its report
// corrects the history here. The last run's start, GPUs and length are
// kept in `completed` so the correction can recompute that run alone.

// lastRunColumns are added to ledgers made before corrections existed;
// rows written then keep last_gpus 0 and are never corrected, and rows
// written before effective service keep last_speed 0 (plain GPU-seconds,
// which is what they were charged).
var lastRunColumns = []string{
	`ALTER TABLE completed ADD COLUMN last_start INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE completed ADD COLUMN last_gpus INTEGER NOT NULL DEFAULT 0`,
	`ALTER TABLE completed ADD COLUMN last_seconds REAL NOT NULL DEFAULT 0`,
	`ALTER TABLE completed ADD COLUMN last_speed REAL NOT NULL DEFAULT 0`,
}

// jobsColumns are added to ledgers made before them. preempt_reason reads
// "" for their jobs (never preempted by the rule, as far as the ledger
// knows); run_speed, the open run's speed under effective service, reads 0,
// plain GPU-seconds, which is what their runs were charged; preemptions
// (priority.Account.Preemptions) reads 0: their jobs count preemptions
// from the upgrade on (the older ledger did not tell them from other
// requeues).
var jobsColumns = []string{
	`ALTER TABLE jobs ADD COLUMN preempt_reason TEXT NOT NULL DEFAULT ''`,
	`ALTER TABLE jobs ADD COLUMN run_speed REAL NOT NULL DEFAULT 0`,
	`ALTER TABLE jobs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0`,
	// Later: the queue service a job inherited (0: none, as before).
	`ALTER TABLE jobs ADD COLUMN inherited REAL NOT NULL DEFAULT 0`,
	// Later: when an opportunistic job was upgraded to guaranteed
	// (priority.Account.Upgraded; 0: never, as before).
	`ALTER TABLE jobs ADD COLUMN upgraded INTEGER NOT NULL DEFAULT 0`,
}

// LastRun is what the correction rule needs of a finished job's last run.
type LastRun struct {
	Start   int64   // Unix seconds
	GPUs    uint32  // 0: unknown, never corrected
	Seconds float64 // its length as charged
	Speed   float64 // its speed under effective service; 0: plain GPU-seconds
}

// CorrectedRun applies a node's report that the job ended at end to its
// last run. The run may only get shorter: a report later than the charged
// end, before the run's start, or for a run of unknown GPUs changes
// nothing, so a forged or late report cannot raise anyone's charge, and a
// repeated report finds nothing left to lower (idempotent). It returns the
// run's new length and the service to take off, at the rate the run was
// charged (its GPUs weighted by its speed under effective service).
func CorrectedRun(r LastRun, end int64) (seconds, reduction float64, ok bool) {
	if r.GPUs == 0 || r.Start <= 0 || end < r.Start {
		return r.Seconds, 0, false
	}
	s := float64(end - r.Start)
	if s >= r.Seconds {
		return r.Seconds, 0, false
	}
	return s, priority.EffectiveRate(r.GPUs, r.Speed) * (r.Seconds - s), true
}

// Correction is what CorrectEnd changed.
type Correction struct {
	JobID      uint32
	Finished   int64
	Before     float64 // GPU-seconds charged before
	After      float64 // and after
	RunSeconds float64 // the last run's corrected length
}

// ErrNoCompletion: the history has no corrigible entry for the job (not
// finished yet, or finished before the last run was recorded).
var ErrNoCompletion = errors.New("no completed-job entry")

// EndCorrector is implemented by stores that can correct a completed
// job's history; the core asks for it with a type assertion so other
// Stores need not.
type EndCorrector interface {
	CorrectEnd(jobID uint32, end int64) (Correction, bool, error)
}

var _ EndCorrector = (*SQLite)(nil)

// CorrectEnd lowers the job's most recent completed-history entry, and its
// jobs row, to a last run ending at end (CorrectedRun's rule). It reports
// false, with no error, when the rule leaves the charge as it is.
func (s *SQLite) CorrectEnd(jobID uint32, end int64) (Correction, bool, error) {
	tx, err := s.conn().Begin()
	if err != nil {
		return Correction{}, false, fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	c := Correction{JobID: jobID}
	var r LastRun
	err = tx.QueryRow(`SELECT finished, gpu_seconds, last_start, last_gpus, last_seconds, last_speed
		FROM completed WHERE job_id = ? ORDER BY finished DESC LIMIT 1`, jobID).Scan(
		&c.Finished, &c.Before, &r.Start, &r.GPUs, &r.Seconds, &r.Speed)
	if errors.Is(err, sql.ErrNoRows) {
		return Correction{}, false, fmt.Errorf("%w: job %d: %w", ErrStore, jobID, ErrNoCompletion)
	}
	if err != nil {
		return Correction{}, false, fmt.Errorf("%w: read completion of job %d: %v", ErrStore, jobID, err)
	}
	secs, less, ok := CorrectedRun(r, end)
	if !ok {
		c.After, c.RunSeconds = c.Before, r.Seconds
		return c, false, nil
	}
	c.After, c.RunSeconds = max(c.Before-less, 0), secs
	if _, err := tx.Exec(`UPDATE completed SET gpu_seconds = ?, last_seconds = ?
		WHERE job_id = ? AND finished = ?`, c.After, secs, jobID, c.Finished); err != nil {
		return Correction{}, false, fmt.Errorf("%w: correct completion of job %d: %v", ErrStore, jobID, err)
	}
	// The jobs row stays consistent for tools (Get), unless the core has
	// rewritten it with the corrected run already (last_run differs).
	if _, err := tx.Exec(`UPDATE jobs SET service_closed = max(service_closed - ?, 0), last_run = ?
		WHERE job_id = ? AND finished = ? AND last_run = ?`, less, secs, jobID, c.Finished, r.Seconds); err != nil {
		return Correction{}, false, fmt.Errorf("%w: correct job %d: %v", ErrStore, jobID, err)
	}
	if err := tx.Commit(); err != nil {
		return Correction{}, false, fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return c, true, nil
}
