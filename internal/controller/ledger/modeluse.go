package ledger

import "fmt"

// Each user's history of each model: the measured GPU use of their last
// finished one-GPU jobs of it, which job_submit/synergy reads to decide
// whether a new job of theirs leaves room for a guest on its GPU
// (gpushare/shardconvert.go). Keyed by user AND model: one user's jobs never
// change how another user's are allocated.

// ModelJobUse is one finished job's place in its user's history of its
// model: the peak of its GPU utilisation samples and the most GPU memory
// it held, as the node agents measured them (JobGPUUse).
type ModelJobUse struct {
	User      uint32
	Model     string
	JobID     uint32
	UtilPeak  float64
	MemPeakMB float64
	Samples   int64
	Finished  int64 // Unix seconds
}

// MaxModelJobUseRows bounds the model_job_use table: the core keeps at
// most 16,384 histories of 8 jobs; the oldest rows go first.
const MaxModelJobUseRows = 131072

// MaxModelJobUsePerKey bounds one user's history of one model.
const MaxModelJobUsePerKey = 8

const modelJobUseSchema = `
CREATE TABLE IF NOT EXISTS model_job_use (
	user_id     INTEGER NOT NULL,
	model       TEXT    NOT NULL,
	job_id      INTEGER NOT NULL,
	util_peak   REAL    NOT NULL,
	mem_peak_mb REAL    NOT NULL,
	samples     INTEGER NOT NULL,
	finished    INTEGER NOT NULL,
	PRIMARY KEY (user_id, model, job_id)
);
CREATE INDEX IF NOT EXISTS model_job_use_finished ON model_job_use(finished);
`

// ModelJobUseStore keeps the histories across slurmctld restarts; SQLite
// is one. The core asks for it with a type assertion.
type ModelJobUseStore interface {
	SaveModelJobUse(rows []ModelJobUse) error
	ModelJobUses() ([]ModelJobUse, error)
}

var _ ModelJobUseStore = (*SQLite)(nil)

// SaveModelJobUse adds rows in one transaction, keeps the newest
// MaxModelJobUsePerKey of each (user, model) it touched and the newest
// MaxModelJobUseRows in all.
func (s *SQLite) SaveModelJobUse(rows []ModelJobUse) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	ins, err := tx.Prepare(`INSERT OR REPLACE INTO model_job_use (user_id, model, job_id, util_peak, mem_peak_mb, samples, finished)
		VALUES (?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer ins.Close()
	trim, err := tx.Prepare(`DELETE FROM model_job_use WHERE user_id = ?1 AND model = ?2 AND job_id NOT IN (
		SELECT job_id FROM model_job_use WHERE user_id = ?1 AND model = ?2 ORDER BY finished DESC, job_id DESC LIMIT ?3)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer trim.Close()
	for _, r := range rows {
		if _, err := ins.Exec(r.User, r.Model, r.JobID, r.UtilPeak, r.MemPeakMB, r.Samples, r.Finished); err != nil {
			return fmt.Errorf("%w: save model use of job %d: %v", ErrStore, r.JobID, err)
		}
		if _, err := trim.Exec(r.User, r.Model, MaxModelJobUsePerKey); err != nil {
			return fmt.Errorf("%w: trim model use: %v", ErrStore, err)
		}
	}
	if _, err := tx.Exec(`DELETE FROM model_job_use WHERE rowid NOT IN (
		SELECT rowid FROM model_job_use ORDER BY finished DESC, rowid DESC LIMIT ?)`, MaxModelJobUseRows); err != nil {
		return fmt.Errorf("%w: bound model_job_use: %v", ErrStore, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// ModelJobUses returns every kept row, oldest first (the order the core
// replays them in).
func (s *SQLite) ModelJobUses() ([]ModelJobUse, error) {
	rows, err := s.conn().Query(`SELECT user_id, model, job_id, util_peak, mem_peak_mb, samples, finished
		FROM model_job_use ORDER BY finished ASC, job_id ASC LIMIT ?`, MaxModelJobUseRows)
	if err != nil {
		return nil, fmt.Errorf("%w: load model use: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []ModelJobUse
	for rows.Next() {
		var r ModelJobUse
		if err := rows.Scan(&r.User, &r.Model, &r.JobID, &r.UtilPeak, &r.MemPeakMB, &r.Samples, &r.Finished); err != nil {
			return nil, fmt.Errorf("%w: scan model use: %v", ErrStore, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
