package spool

import (
	"fmt"
	"time"
)

// Job ends reported by slurmstepd (the SPANK plugin) wait here until the controller
// acknowledges them: the report matters most when slurmctld is down, so it
// must survive both the outage and an agent restart. One row per job and
// end, so a report repeated for one run spools one row, while a
// requeued job's later run gets its own.
const jobEndSchema = `
CREATE TABLE IF NOT EXISTS job_ends (
	job_id     INTEGER NOT NULL,
	end_unix   INTEGER NOT NULL,
	node       TEXT    NOT NULL,
	created    INTEGER NOT NULL, -- Unix nanoseconds
	delivered  INTEGER NOT NULL, -- Unix nanoseconds of the ack; 0 = pending
	attempts   INTEGER NOT NULL,
	last_error TEXT    NOT NULL,
	PRIMARY KEY (job_id, end_unix)
);
CREATE INDEX IF NOT EXISTS job_ends_pending ON job_ends(delivered, created);
`

// keepDeliveredJobEnds is how long delivered reports stay (for a look
// after the fact); older ones are dropped as new ones arrive, so the table
// stays small on a busy node.
const keepDeliveredJobEnds = 7 * 24 * time.Hour

// JobEnd is one spooled report.
type JobEnd struct {
	JobID    uint32
	End      int64 // Unix seconds
	Node     string
	Attempts int
}

// AddJobEnd spools a report; the same job and end again is a no-op.
func (s *Spool) AddJobEnd(j JobEnd, now time.Time) error {
	if _, err := s.db.Exec(`INSERT OR IGNORE INTO job_ends (job_id, end_unix, node, created, delivered, attempts, last_error)
		VALUES (?,?,?,?,0,0,'')`, j.JobID, j.End, j.Node, now.UnixNano()); err != nil {
		return fmt.Errorf("%w: spool end of job %d: %v", ErrSpool, j.JobID, err)
	}
	if _, err := s.db.Exec(`DELETE FROM job_ends WHERE delivered != 0 AND delivered < ?`,
		now.Add(-keepDeliveredJobEnds).UnixNano()); err != nil {
		return fmt.Errorf("%w: prune job ends: %v", ErrSpool, err)
	}
	return nil
}

// PendingJobEnds returns up to limit undelivered reports, oldest first.
func (s *Spool) PendingJobEnds(limit int) ([]JobEnd, error) {
	rows, err := s.db.Query(`SELECT job_id, end_unix, node, attempts FROM job_ends
		WHERE delivered = 0 ORDER BY created LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: pending job ends: %v", ErrSpool, err)
	}
	defer rows.Close()
	var out []JobEnd
	for rows.Next() {
		var j JobEnd
		if err := rows.Scan(&j.JobID, &j.End, &j.Node, &j.Attempts); err != nil {
			return nil, fmt.Errorf("%w: scan job end: %v", ErrSpool, err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// MarkJobEndDelivered records the controller's ack.
func (s *Spool) MarkJobEndDelivered(j JobEnd, now time.Time) error {
	if _, err := s.db.Exec(`UPDATE job_ends SET delivered = ? WHERE job_id = ? AND end_unix = ?`,
		now.UnixNano(), j.JobID, j.End); err != nil {
		return fmt.Errorf("%w: mark end of job %d delivered: %v", ErrSpool, j.JobID, err)
	}
	return nil
}

// MarkJobEndFailed counts a failed attempt.
func (s *Spool) MarkJobEndFailed(j JobEnd, cause error) error {
	if _, err := s.db.Exec(`UPDATE job_ends SET attempts = attempts + 1, last_error = ? WHERE job_id = ? AND end_unix = ?`,
		cause.Error(), j.JobID, j.End); err != nil {
		return fmt.Errorf("%w: mark end of job %d failed: %v", ErrSpool, j.JobID, err)
	}
	return nil
}
