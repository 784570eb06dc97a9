package ledger

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

// ErrStore is wrapped by every error the store returns.
var ErrStore = errors.New("ledger")

// Record is one job's entry: its identity, its Tiresias accounting (the
// rules live in priority.Account; the ledger only persists them) and when
// it finished. Times are Unix seconds; service is GPU-seconds.
type Record struct {
	JobID       uint32
	FirstSubmit int64 // first submission seen; Slurm resets its own on requeue
	// Ready is when the job could first run (priority.Arrival.Ready), 0
	// while it cannot or is not known to. Not stored: the core reads it
	// again from Slurm's EligibleTime when it next sees the job before or
	// in its first run, and a restart forgets the ends it is compared with.
	Ready int64
	priority.Account
	Finished int64 // when the job finished, 0 while it is active
	// LastRunStart, LastRunGPUs and LastRunSpeed name the last run of a
	// finished job (CloseRun forgets them); a node's report of the true end
	// corrects that run's length (jobend.go) at the rate it was charged.
	LastRunStart int64
	LastRunGPUs  uint32
	LastRunSpeed float64 // 0: plain GPU-seconds (priority.EffectiveRate)
	// PreemptReason is why the job was last preempted by Lachesis's rule
	// ("" if never): the preemptor, the queues, the victim's run.
	PreemptReason string
	// Sweep is the job's sweep key (priority.Siblings) and InSweep whether
	// the core has set it (a zero key is a valid one: root, no account, no
	// GPUs); kept with its completion so a restart can rebuild the sweeps
	// (sweeps.go). Not stored with active jobs: the core sets them again
	// when it next ranks the job.
	Sweep   priority.SiblingKey
	InSweep bool
	// SweepSample: the job completed, so its GPU-time is a sample for its
	// sweep; a cancelled or failed job's end only ends its membership.
	SweepSample bool
	// Inherited is the queue service the job took over from an ended job
	// it replaces (policy/priority/inherit.go), included in ServiceClosed; kept so
	// that it is added once, across passes and restarts.
	Inherited float64
}

// Store is what the core needs from persistent storage.
type Store interface {
	// Active returns every job that has not finished.
	Active() ([]Record, error)
	// CompletedGPUTimes returns the total service of up to limit most
	// recently finished jobs, and how many finished jobs there are in all.
	CompletedGPUTimes(limit int) (samples []float64, total int, err error)
	// Save upserts records in one transaction; records with Finished set
	// also join the completed-job history.
	Save(records []Record) error
	// Usage and SaveUsage persist fair-share usage per account (usage.go).
	Usage() ([]AccountUsage, error)
	SaveUsage(usage []AccountUsage) error
	Close() error
}

// SQLite is the Store on a SQLite file.
type SQLite struct{ h *sqlitedb.Handle }

// ErrReplaced says the ledger's file was deleted or replaced while open.
var ErrReplaced = sqlitedb.ErrReplaced

var _ Store = (*SQLite)(nil)

const schema = `
CREATE TABLE IF NOT EXISTS jobs (
	job_id        INTEGER PRIMARY KEY,
	first_submit  INTEGER NOT NULL,
	service_closed REAL   NOT NULL,
	service_base  REAL    NOT NULL,
	run_start     INTEGER NOT NULL,
	run_gpus      INTEGER NOT NULL,
	run_seconds   REAL    NOT NULL,
	last_run      REAL    NOT NULL,
	runs          INTEGER NOT NULL,
	waiting_since INTEGER NOT NULL,
	queue         INTEGER NOT NULL,
	queue_entry   INTEGER NOT NULL,
	promotions    INTEGER NOT NULL,
	finished      INTEGER NOT NULL,
	preempt_reason TEXT   NOT NULL DEFAULT '',
	run_speed     REAL    NOT NULL DEFAULT 0,
	preemptions   INTEGER NOT NULL DEFAULT 0,
	inherited     REAL    NOT NULL DEFAULT 0,
	upgraded      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_active ON jobs(finished);
CREATE TABLE IF NOT EXISTS completed (
	job_id      INTEGER NOT NULL,
	finished    INTEGER NOT NULL,
	gpu_seconds REAL    NOT NULL,
	last_start   INTEGER NOT NULL DEFAULT 0,
	last_gpus    INTEGER NOT NULL DEFAULT 0,
	last_seconds REAL    NOT NULL DEFAULT 0,
	last_speed   REAL    NOT NULL DEFAULT 0,
	in_sweep      INTEGER NOT NULL DEFAULT 0,
	sweep_user    INTEGER NOT NULL DEFAULT 0,
	sweep_account TEXT    NOT NULL DEFAULT '',
	sweep_gpus    INTEGER NOT NULL DEFAULT 0,
	first_submit  INTEGER NOT NULL DEFAULT 0,
	sweep_partition TEXT  NOT NULL DEFAULT '',
	sweep_sample  INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (job_id, finished)
);
CREATE INDEX IF NOT EXISTS completed_recent ON completed(finished);
` + jobGPUUseSchema + badPairsSchema + modelJobUseSchema + exclusionsSchema + usageSchema

// Open opens (creating if needed) the ledger at path. synchronous=NORMAL:
// a kill -9 of slurmctld loses nothing committed; only a power loss may
// lose the last commits, which the next pass recomputes from Slurm.
func Open(path string) (*SQLite, error) { return OpenOwned(path, sqlitedb.NoOwner) }

// OpenOwned is Open with the file (0600) handed to uid when run as root.
func OpenOwned(path string, uid int) (*SQLite, error) {
	h, err := sqlitedb.OpenHandle(path, sqlitedb.Normal, 0o750, schema, uid)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	if err := addColumns(h.DB(), slices.Concat(lastRunColumns, jobsColumns, sweepColumns)); err != nil {
		h.Close()
		return nil, err
	}
	return &SQLite{h: h}, nil
}

// addColumns brings a ledger made by an earlier version up to the schema:
// each statement adds one column, with a default that reads as what the
// older ledger meant; a column already there is left alone.
func addColumns(db *sql.DB, stmts []string) error {
	for _, stmt := range stmts {
		if _, err := db.Exec(stmt); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return fmt.Errorf("%w: migrate: %s: %v", ErrStore, stmt, err)
		}
	}
	return nil
}

// CheckFile returns an error wrapping ErrReplaced when the path no longer
// names the file this store has open.
func (s *SQLite) CheckFile() error {
	if err := s.h.CheckFile(); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	return nil
}

// Reopen opens the file the path names now (creating it); the caller
// rewrites what it lacks.
func (s *SQLite) Reopen() error {
	if err := s.h.Reopen(); err != nil {
		return fmt.Errorf("%w: reopen: %v", ErrStore, err)
	}
	return nil
}

func (s *SQLite) conn() *sql.DB { return s.h.DB() }

// OpenReadOnly opens an existing ledger for reading while slurmctld writes
// it.
func OpenReadOnly(path string) (*SQLite, error) {
	db, err := sqlitedb.OpenReadOnly(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	return &SQLite{h: sqlitedb.ReadOnlyHandle(db)}, nil
}

const columns = `job_id, first_submit, service_closed, service_base, run_start, run_gpus,
	run_seconds, last_run, runs, waiting_since, queue, queue_entry, promotions, finished, preempt_reason, run_speed,
	preemptions, inherited, upgraded`

// Active implements Store.
func (s *SQLite) Active() ([]Record, error) {
	rows, err := s.conn().Query(`SELECT ` + columns + ` FROM jobs WHERE finished = 0`)
	if err != nil {
		return nil, fmt.Errorf("%w: load active jobs: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("%w: scan job: %v", ErrStore, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load active jobs: %v", ErrStore, err)
	}
	return out, nil
}

// scanRecord reads one row of `SELECT columns FROM jobs`.
func scanRecord(row interface{ Scan(...any) error }) (Record, error) {
	var r Record
	if err := row.Scan(&r.JobID, &r.FirstSubmit, &r.ServiceClosed, &r.ServiceBase,
		&r.RunStart, &r.RunGPUs, &r.RunSeconds, &r.LastRun, &r.Runs, &r.WaitingSince,
		&r.Queue, &r.QueueEntry, &r.Promotions, &r.Finished, &r.PreemptReason, &r.RunSpeed, &r.Preemptions, &r.Inherited, &r.Upgraded); err != nil {
		return Record{}, err
	}
	r.RunOpen = r.RunStart != 0
	return r, nil
}

// Get returns one job's record, finished or not (for tools and tests).
func (s *SQLite) Get(jobID uint32) (Record, bool, error) {
	r, err := scanRecord(s.conn().QueryRow(`SELECT `+columns+` FROM jobs WHERE job_id = ?`, jobID))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("%w: get job %d: %v", ErrStore, jobID, err)
	}
	return r, true, nil
}

// CompletedGPUTimes implements Store.
func (s *SQLite) CompletedGPUTimes(limit int) ([]float64, int, error) {
	var total int
	if err := s.conn().QueryRow(`SELECT count(*) FROM completed`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("%w: count completed: %v", ErrStore, err)
	}
	rows, err := s.conn().Query(`SELECT gpu_seconds FROM completed ORDER BY finished DESC LIMIT ?`, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: load completed: %v", ErrStore, err)
	}
	defer rows.Close()
	samples := make([]float64, 0, min(limit, total))
	for rows.Next() {
		var v float64
		if err := rows.Scan(&v); err != nil {
			return nil, 0, fmt.Errorf("%w: scan completed: %v", ErrStore, err)
		}
		samples = append(samples, v)
	}
	return samples, total, rows.Err()
}

// FinishedLister is implemented by stores that can name the most recently
// finished jobs; the core asks for it with a type assertion so other Stores
// need not.
type FinishedLister interface {
	RecentlyFinished(limit int) ([]uint32, error)
}

var _ FinishedLister = (*SQLite)(nil)

// FinishedRecordLister is implemented by stores that can return the
// records of the most recently finished jobs, which the core keeps while
// slurmctld lists them: a finished job requeued (`scontrol requeue`)
// continues its record instead of starting from zero.
type FinishedRecordLister interface {
	FinishedRecords(limit int) ([]Record, error)
}

var _ FinishedRecordLister = (*SQLite)(nil)

// FinishedRecords returns the records of up to limit most recently
// finished jobs, newest first.
func (s *SQLite) FinishedRecords(limit int) ([]Record, error) {
	rows, err := s.conn().Query(`SELECT `+columns+` FROM jobs WHERE finished != 0 ORDER BY finished DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: list finished jobs: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("%w: scan finished job: %v", ErrStore, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RecentlyFinished returns the ids of up to limit most recently finished
// jobs, newest first.
func (s *SQLite) RecentlyFinished(limit int) ([]uint32, error) {
	rows, err := s.conn().Query(`SELECT job_id FROM completed ORDER BY finished DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: list finished jobs: %v", ErrStore, err)
	}
	defer rows.Close()
	var ids []uint32
	for rows.Next() {
		var id uint32
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("%w: scan finished job: %v", ErrStore, err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// Save implements Store.
func (s *SQLite) Save(records []Record) error {
	if len(records) == 0 {
		return nil
	}
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	upsert, err := tx.Prepare(`INSERT OR REPLACE INTO jobs (` + columns + `)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer upsert.Close()
	done, err := tx.Prepare(`INSERT OR IGNORE INTO completed (job_id, finished, gpu_seconds,
		last_start, last_gpus, last_seconds, last_speed,
		in_sweep, sweep_user, sweep_account, sweep_gpus, first_submit, sweep_partition, sweep_sample)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer done.Close()
	for i := range records {
		r := &records[i]
		if _, err := upsert.Exec(r.JobID, r.FirstSubmit, r.ServiceClosed, r.ServiceBase,
			r.RunStart, r.RunGPUs, r.RunSeconds, r.LastRun, r.Runs, r.WaitingSince,
			r.Queue, r.QueueEntry, r.Promotions, r.Finished, r.PreemptReason, r.RunSpeed, r.Preemptions, r.Inherited, r.Upgraded); err != nil {
			return fmt.Errorf("%w: save job %d: %v", ErrStore, r.JobID, err)
		}
		if r.Finished != 0 {
			if _, err := done.Exec(r.JobID, r.Finished, r.Total(),
				r.LastRunStart, r.LastRunGPUs, r.LastRun, r.LastRunSpeed,
				r.InSweep, r.Sweep.User, r.Sweep.Account, r.Sweep.GPUs, r.FirstSubmit, r.Sweep.Partition, r.SweepSample); err != nil {
				return fmt.Errorf("%w: record completion of job %d: %v", ErrStore, r.JobID, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// Close implements Store.
func (s *SQLite) Close() error { return s.h.Close() }
