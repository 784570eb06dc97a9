package spool

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/profile"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// ErrSpool is wrapped by every error the spool returns.
var ErrSpool = errors.New("spool")

// Run states.
const (
	RunRunning     = "running"
	RunDone        = "done"
	RunFailed      = "failed"
	RunInterrupted = "interrupted" // the agent stopped during the run
)

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	id       TEXT    PRIMARY KEY,
	model    TEXT    NOT NULL,
	uid      INTEGER NOT NULL,
	user     TEXT    NOT NULL,
	argv     TEXT    NOT NULL, -- JSON array
	started  INTEGER NOT NULL, -- Unix nanoseconds
	finished INTEGER NOT NULL, -- 0 while running
	state    TEXT    NOT NULL,
	error    TEXT    NOT NULL,
	profile  TEXT    NOT NULL  -- the profile's ID once the run is done
);
CREATE TABLE IF NOT EXISTS measurements (
	run_id     TEXT    NOT NULL,
	seq        INTEGER NOT NULL,
	cpus       INTEGER NOT NULL,
	throughput REAL    NOT NULL,
	samples    INTEGER NOT NULL,
	seconds    REAL    NOT NULL,
	at         INTEGER NOT NULL,
	PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS profiles (
	id         TEXT    PRIMARY KEY,
	model      TEXT    NOT NULL,
	record     BLOB    NOT NULL, -- msgpack, as sent
	created    INTEGER NOT NULL,
	delivered  INTEGER NOT NULL, -- Unix nanoseconds of the ack; 0 = pending
	duplicate  INTEGER NOT NULL, -- the ack said the controller had it already
	attempts   INTEGER NOT NULL,
	last_error TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS profiles_pending ON profiles(delivered, created);
`

// Spool is the agent's SQLite file.
type Spool struct{ db *sql.DB }

// Open opens (creating if needed) the spool at path.
func Open(path string) (*Spool, error) {
	// synchronous=FULL: a profile the agent said it saved survives a power
	// cut too; profiles are rare, so the cost does not matter.
	db, err := sqlitedb.Open(path, sqlitedb.Full, 0o700, schema+jobEndSchema)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSpool, err)
	}
	// Spools made before the controller could refuse a profile for good
	// lack the column; their rows read 0, not refused.
	_, err = db.Exec(`ALTER TABLE profiles ADD COLUMN refused INTEGER NOT NULL DEFAULT 0`)
	if err != nil && !strings.Contains(err.Error(), "duplicate column") {
		db.Close()
		return nil, fmt.Errorf("%w: add refused column: %v", ErrSpool, err)
	}
	return &Spool{db: db}, nil
}

// Close closes the file.
func (s *Spool) Close() error { return s.db.Close() }

// Run is one profiling run as the spool records it.
type Run struct {
	ID      string
	Model   string
	UID     uint32
	User    string
	Argv    []string
	Started time.Time
}

// BeginRun records a run that starts now.
func (s *Spool) BeginRun(r Run) error {
	argv, err := json.Marshal(r.Argv)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSpool, err)
	}
	_, err = s.db.Exec(`INSERT INTO runs (id, model, uid, user, argv, started, finished, state, error, profile)
		VALUES (?,?,?,?,?,?,0,?,'','')`, r.ID, r.Model, r.UID, r.User, string(argv), r.Started.UnixNano(), RunRunning)
	if err != nil {
		return fmt.Errorf("%w: begin run %s: %v", ErrSpool, r.ID, err)
	}
	return nil
}

// AddMeasurement records one sweep point of a run as soon as it is taken.
func (s *Spool) AddMeasurement(runID string, seq int, m profile.Measurement, at time.Time) error {
	_, err := s.db.Exec(`INSERT OR REPLACE INTO measurements (run_id, seq, cpus, throughput, samples, seconds, at)
		VALUES (?,?,?,?,?,?,?)`, runID, seq, m.CPUs, m.Throughput, m.Samples, m.Seconds, at.UnixNano())
	if err != nil {
		return fmt.Errorf("%w: measurement %d of run %s: %v", ErrSpool, seq, runID, err)
	}
	return nil
}

// Measurements returns a run's recorded points in order.
func (s *Spool) Measurements(runID string) ([]profile.Measurement, error) {
	rows, err := s.db.Query(`SELECT cpus, throughput, samples, seconds FROM measurements
		WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("%w: measurements of %s: %v", ErrSpool, runID, err)
	}
	defer rows.Close()
	var out []profile.Measurement
	for rows.Next() {
		var m profile.Measurement
		if err := rows.Scan(&m.CPUs, &m.Throughput, &m.Samples, &m.Seconds); err != nil {
			return nil, fmt.Errorf("%w: scan measurement: %v", ErrSpool, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// FailRun records that a run ended without a profile.
func (s *Spool) FailRun(runID, state string, cause error) error {
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	_, err := s.db.Exec(`UPDATE runs SET finished = ?, state = ?, error = ? WHERE id = ?`,
		time.Now().UnixNano(), state, msg, runID)
	if err != nil {
		return fmt.Errorf("%w: end run %s: %v", ErrSpool, runID, err)
	}
	return nil
}

// FinishRun records a run's profile, pending delivery, and marks the run
// done, in one transaction. The run and the profile may have different IDs
// (the profiler names its records).
func (s *Spool) FinishRun(runID string, rec profile.Record) error {
	blob, err := wire.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSpool, err)
	}
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrSpool, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	now := time.Now().UnixNano()
	if _, err := tx.Exec(`INSERT OR IGNORE INTO profiles (id, model, record, created, delivered, duplicate, attempts, last_error)
		VALUES (?,?,?,?,0,0,0,'')`, rec.ID, rec.Model, blob, now); err != nil {
		return fmt.Errorf("%w: spool profile %s: %v", ErrSpool, rec.ID, err)
	}
	if _, err := tx.Exec(`UPDATE runs SET finished = ?, state = ?, profile = ? WHERE id = ?`, now, RunDone, rec.ID, runID); err != nil {
		return fmt.Errorf("%w: end run %s: %v", ErrSpool, runID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrSpool, err)
	}
	return nil
}

// InterruptRuns marks runs left "running" by an agent that stopped; called
// at start, before any new run.
func (s *Spool) InterruptRuns() (int, error) {
	res, err := s.db.Exec(`UPDATE runs SET finished = ?, state = ?, error = 'the agent stopped during the run'
		WHERE state = ?`, time.Now().UnixNano(), RunInterrupted, RunRunning)
	if err != nil {
		return 0, fmt.Errorf("%w: interrupt runs: %v", ErrSpool, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Entry is a spooled profile and its delivery state.
type Entry struct {
	Record    profile.Record
	Created   time.Time
	Delivered time.Time // zero while pending
	// Refused is when the controller refused the profile for good (a
	// quota; LastError says which); it is not sent again.
	Refused   time.Time
	Duplicate bool
	Attempts  int
	LastError string
}

// Pending returns up to limit profiles neither acknowledged nor refused
// for good, oldest first.
func (s *Spool) Pending(limit int) ([]Entry, error) {
	rows, err := s.db.Query(`SELECT record, created, delivered, refused, duplicate, attempts, last_error
		FROM profiles WHERE delivered = 0 AND refused = 0 ORDER BY created, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: pending profiles: %v", ErrSpool, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: pending profiles: %v", ErrSpool, err)
	}
	return out, nil
}

// Get returns one spooled profile.
func (s *Spool) Get(id string) (Entry, bool, error) {
	row := s.db.QueryRow(`SELECT record, created, delivered, refused, duplicate, attempts, last_error
		FROM profiles WHERE id = ?`, id)
	e, err := scanEntry(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, err
	}
	return e, true, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanEntry(r scanner) (Entry, error) {
	var (
		e                           Entry
		blob                        []byte
		created, delivered, refused int64
	)
	if err := r.Scan(&blob, &created, &delivered, &refused, &e.Duplicate, &e.Attempts, &e.LastError); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Entry{}, err
		}
		return Entry{}, fmt.Errorf("%w: scan profile: %v", ErrSpool, err)
	}
	if err := wire.Unmarshal(blob, &e.Record); err != nil {
		return Entry{}, fmt.Errorf("%w: decode spooled profile: %v", ErrSpool, err)
	}
	e.Created = time.Unix(0, created)
	if delivered != 0 {
		e.Delivered = time.Unix(0, delivered)
	}
	if refused != 0 {
		e.Refused = time.Unix(0, refused)
	}
	return e, nil
}

// MarkDelivered records the controller's acknowledgement of id.
func (s *Spool) MarkDelivered(id string, duplicate bool) error {
	_, err := s.db.Exec(`UPDATE profiles SET delivered = ?, duplicate = ?, attempts = attempts + 1, last_error = ''
		WHERE id = ? AND delivered = 0`, time.Now().UnixNano(), duplicate, id)
	if err != nil {
		return fmt.Errorf("%w: mark %s delivered: %v", ErrSpool, id, err)
	}
	return nil
}

// MarkFailed records a failed delivery attempt of id.
func (s *Spool) MarkFailed(id string, cause error) error {
	_, err := s.db.Exec(`UPDATE profiles SET attempts = attempts + 1, last_error = ? WHERE id = ?`, cause.Error(), id)
	if err != nil {
		return fmt.Errorf("%w: mark %s failed: %v", ErrSpool, id, err)
	}
	return nil
}

// MarkRefused records that the controller refused id for good (cause
// says why); it is no longer pending.
func (s *Spool) MarkRefused(id string, cause error) error {
	_, err := s.db.Exec(`UPDATE profiles SET refused = ?, attempts = attempts + 1, last_error = ? WHERE id = ? AND delivered = 0`,
		time.Now().UnixNano(), cause.Error(), id)
	if err != nil {
		return fmt.Errorf("%w: mark %s refused: %v", ErrSpool, id, err)
	}
	return nil
}

// Counts is how many spooled profiles are pending, delivered and refused
// for good.
type Counts struct{ Pending, Delivered, Refused int }

// Count counts spooled profiles by delivery state.
func (s *Spool) Count() (Counts, error) {
	var c Counts
	err := s.db.QueryRow(`SELECT
		coalesce(sum(CASE WHEN delivered = 0 AND refused = 0 THEN 1 ELSE 0 END), 0),
		coalesce(sum(CASE WHEN delivered != 0 THEN 1 ELSE 0 END), 0),
		coalesce(sum(CASE WHEN refused != 0 THEN 1 ELSE 0 END), 0) FROM profiles`).Scan(&c.Pending, &c.Delivered, &c.Refused)
	if err != nil {
		return Counts{}, fmt.Errorf("%w: count profiles: %v", ErrSpool, err)
	}
	return c, nil
}
