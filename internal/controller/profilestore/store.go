package profilestore

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/profile"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// ErrStore is wrapped by every error the store returns.
var ErrStore = errors.New("profile store")

// ErrNoTables means a read-only open found a database the controller never
// stored a profile in (its agent listener never ran on it).
var ErrNoTables = errors.New("no profile tables (has slurmctld run with agent.listen set on this db_path?)")

const schema = `
CREATE TABLE IF NOT EXISTS profiles (
	id       TEXT    PRIMARY KEY,
	model    TEXT    NOT NULL,
	node     TEXT    NOT NULL,
	user     TEXT    NOT NULL,
	gpus     INTEGER NOT NULL,
	finished INTEGER NOT NULL, -- Unix nanoseconds
	received INTEGER NOT NULL, -- Unix nanoseconds
	record   TEXT    NOT NULL, -- profile.Record as JSON
	gpu_type TEXT    NOT NULL DEFAULT '', -- lower case; '' = untyped
	uid       INTEGER NOT NULL DEFAULT -1, -- the owner; -1: stored before profiles had owners
	published INTEGER NOT NULL DEFAULT 0   -- Unix nanoseconds an admin published it; 0: not
);
CREATE INDEX IF NOT EXISTS profiles_by_model ON profiles(model, finished);
CREATE TABLE IF NOT EXISTS model_keys (
	key        TEXT    PRIMARY KEY,
	first_seen INTEGER NOT NULL, -- Unix seconds
	last_seen  INTEGER NOT NULL,
	jobs       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS gpu_telemetry (
	node         TEXT    NOT NULL,
	gpu          INTEGER NOT NULL,
	uuid         TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	util_pct     REAL    NOT NULL,
	mem_used_mb  REAL    NOT NULL,
	mem_total_mb REAL    NOT NULL,
	temp_c       REAL    NOT NULL,
	power_w      REAL    NOT NULL,
	at           INTEGER NOT NULL, -- Unix nanoseconds of the sample
	PRIMARY KEY (node, gpu)
);
`

// Store is the profile tables of one SQLite file.
type Store struct {
	h *sqlitedb.Handle
}

// Open opens (creating if needed) the tables in the SQLite file at path.
func Open(path string) (*Store, error) { return OpenOwned(path, sqlitedb.NoOwner) }

// OpenOwned is Open with the file (0600) handed to uid when run as root.
func OpenOwned(path string, uid int) (*Store, error) {
	h, err := sqlitedb.OpenHandle(path, sqlitedb.Normal, 0o750, schema, uid)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStore, err)
	}
	if err := migrateGPUType(h.DB()); err != nil {
		h.Close()
		return nil, err
	}
	if err := migrateOwners(h.DB()); err != nil {
		h.Close()
		return nil, err
	}
	return &Store{h: h}, nil
}

// migrateOwners adds the owner's uid and the time an admin published a
// profile (0: never) to profile tables made before profiles had owners.
// Their rows get uid -1, no owner: they size nobody's jobs until an admin
// publishes them (lachesis-profiler publish), since who made them cannot be
// told any more.
func migrateOwners(db *sql.DB) error {
	for _, col := range []string{
		`uid INTEGER NOT NULL DEFAULT -1`,
		`published INTEGER NOT NULL DEFAULT 0`,
	} {
		if _, err := db.Exec(`ALTER TABLE profiles ADD COLUMN ` + col); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return fmt.Errorf("%w: add column %s: %v", ErrStore, col, err)
		}
	}
	if _, err := db.Exec(`CREATE INDEX IF NOT EXISTS profiles_by_owner ON profiles(model, uid, finished)`); err != nil {
		return fmt.Errorf("%w: index profiles by owner: %v", ErrStore, err)
	}
	return nil
}

// migrateGPUType adds the GPU type to profile tables made before profiles
// had one (their rows read ”, untyped) and indexes profiles by model and
// type. The index is made here, after the column exists, not in schema,
// which an old file runs before the column is added.
func migrateGPUType(db *sql.DB) error {
	_, err := db.Exec(`ALTER TABLE profiles ADD COLUMN gpu_type TEXT NOT NULL DEFAULT ''`)
	if err != nil && !strings.Contains(err.Error(), "duplicate column") {
		return fmt.Errorf("%w: add gpu_type column: %v", ErrStore, err)
	}
	if _, err := db.Exec(`CREATE INDEX IF NOT EXISTS profiles_by_model_type ON profiles(model, gpu_type, finished)`); err != nil {
		return fmt.Errorf("%w: index profiles by type: %v", ErrStore, err)
	}
	return nil
}

// CheckFile returns an error wrapping sqlitedb.ErrReplaced when the path
// no longer names the open file (the ledger shares it: see the core).
func (s *Store) CheckFile() error {
	if err := s.h.CheckFile(); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	return nil
}

// Reopen opens the file the path names now (creating it and the tables);
// the caller stores again what it lacks.
func (s *Store) Reopen() error {
	if err := s.h.Reopen(); err != nil {
		return fmt.Errorf("%w: reopen: %v", ErrStore, err)
	}
	return nil
}

// OpenReadOnly opens an existing file for reading while slurmctld writes it.
func OpenReadOnly(path string) (*Store, error) {
	db, err := sqlitedb.OpenReadOnly(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	var n int
	err = db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('profiles', 'model_keys')`).Scan(&n)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrStore, path, err)
	}
	if n < 2 {
		db.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrStore, path, ErrNoTables)
	}
	return &Store{h: sqlitedb.ReadOnlyHandle(db)}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.h.Close() }

// Put stores rec unless a record with its ID is already stored; inserted
// says which happened.
func (s *Store) Put(rec profile.Record) (inserted bool, err error) {
	blob, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("%w: encode record %s: %v", ErrStore, rec.ID, err)
	}
	res, err := s.h.DB().Exec(`INSERT OR IGNORE INTO profiles (id, model, node, user, gpus, finished, received, record, gpu_type, uid)
		VALUES (?,?,?,?,?,?,?,?,?,?)`,
		rec.ID, rec.Model, rec.Node, rec.User, rec.GPUs, unixNano(rec.Finished), time.Now().UnixNano(), string(blob),
		strings.ToLower(rec.GPUType), int64(rec.UID))
	if err != nil {
		return false, fmt.Errorf("%w: store record %s: %v", ErrStore, rec.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%w: store record %s: %v", ErrStore, rec.ID, err)
	}
	return n == 1, nil
}

// Has reports whether a profile with id is stored.
func (s *Store) Has(id string) (bool, error) {
	var one int
	err := s.h.DB().QueryRow(`SELECT 1 FROM profiles WHERE id = ?`, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: look up profile %s: %v", ErrStore, id, err)
	}
	return true, nil
}

// ProfileCount is how many profiles of one model one user measured on
// one node.
type ProfileCount struct {
	User, Node, Model string
	Profiles          int
}

// ProfileCounts counts the stored profiles by user, node and model: what
// the agent listener's quotas start from.
func (s *Store) ProfileCounts() ([]ProfileCount, error) {
	rows, err := s.h.DB().Query(`SELECT user, node, model, count(*) FROM profiles GROUP BY user, node, model`)
	if err != nil {
		return nil, fmt.Errorf("%w: count profiles: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []ProfileCount
	for rows.Next() {
		var u ProfileCount
		if err := rows.Scan(&u.User, &u.Node, &u.Model, &u.Profiles); err != nil {
			return nil, fmt.Errorf("%w: count profiles: %v", ErrStore, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: count profiles: %v", ErrStore, err)
	}
	return out, nil
}

// unixNano maps the zero time to 0 rather than to a huge negative number.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Latest returns the most recently finished profile of model.
func (s *Store) Latest(model string) (profile.Record, bool, error) {
	var blob string
	err := s.h.DB().QueryRow(`SELECT record FROM profiles WHERE model = ?
		ORDER BY finished DESC, received DESC LIMIT 1`, model).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) {
		return profile.Record{}, false, nil
	}
	if err != nil {
		return profile.Record{}, false, fmt.Errorf("%w: latest profile of %q: %v", ErrStore, model, err)
	}
	rec, err := decode(blob)
	if err != nil {
		return profile.Record{}, false, err
	}
	return rec, true, nil
}

// LatestAll returns every model's most recently finished profile.
func (s *Store) LatestAll() (map[string]profile.Record, error) {
	out := map[string]profile.Record{}
	err := s.eachRecord("load profiles", `SELECT p.record FROM profiles p
		WHERE p.id = (SELECT q.id FROM profiles q WHERE q.model = p.model
		              ORDER BY q.finished DESC, q.received DESC LIMIT 1)`,
		func(rec profile.Record) { out[rec.Model] = rec })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LatestOwned returns, for every model and owner, the owner's most
// recently finished profile of the model (profiles without an owner,
// stored before profiles had one, are left out).
func (s *Store) LatestOwned() ([]profile.Record, error) {
	var out []profile.Record
	err := s.eachRecord("load owned profiles", `SELECT p.record FROM profiles p
		WHERE p.uid >= 0 AND p.id = (SELECT q.id FROM profiles q WHERE q.model = p.model AND q.uid = p.uid
		              ORDER BY q.finished DESC, q.received DESC LIMIT 1)`,
		func(rec profile.Record) { out = append(out, rec) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LatestPublished returns every model's most recently published profile:
// the one that sizes the jobs of users without a profile of their own.
func (s *Store) LatestPublished() (map[string]profile.Record, error) {
	out := map[string]profile.Record{}
	err := s.eachRecord("load published profiles", `SELECT p.record FROM profiles p
		WHERE p.published > 0 AND p.id = (SELECT q.id FROM profiles q WHERE q.model = p.model AND q.published > 0
		              ORDER BY q.published DESC, q.finished DESC LIMIT 1)`,
		func(rec profile.Record) { out[rec.Model] = rec })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// LatestByType returns, for every model with a published profile on a GPU
// type, its latest published profile on each type (untyped profiles are
// left out). Only an admin's publication makes a speed: a user's own
// profile could claim any throughput.
func (s *Store) LatestByType() ([]profile.Record, error) {
	var out []profile.Record
	err := s.eachRecord("load typed profiles", `SELECT p.record FROM profiles p
		WHERE p.gpu_type != '' AND p.published > 0 AND p.id = (SELECT q.id FROM profiles q
		      WHERE q.model = p.model AND q.gpu_type = p.gpu_type AND q.published > 0
		      ORDER BY q.finished DESC, q.received DESC LIMIT 1)`,
		func(rec profile.Record) { out = append(out, rec) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ErrNotFound: no stored profile matches what Publish was asked for.
var ErrNotFound = errors.New("no such profile")

// Publish makes the profile id (of model) size the jobs of every user who
// has none of their own, and gives its per-type throughput; it returns the
// profile. Only root or SlurmUser may write the file (0600).
func (s *Store) Publish(model, id string) (profile.Record, error) {
	res, err := s.h.DB().Exec(`UPDATE profiles SET published = ? WHERE id = ? AND model = ?`, time.Now().UnixNano(), id, model)
	if err != nil {
		return profile.Record{}, fmt.Errorf("%w: publish %s: %v", ErrStore, id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return profile.Record{}, fmt.Errorf("%w: %w: profile %q of model %q", ErrStore, ErrNotFound, id, model)
	}
	var blob string
	if err := s.h.DB().QueryRow(`SELECT record FROM profiles WHERE id = ?`, id).Scan(&blob); err != nil {
		return profile.Record{}, fmt.Errorf("%w: publish %s: %v", ErrStore, id, err)
	}
	return decode(blob)
}

// LatestOf returns the most recently finished profile of model by the
// user named user.
func (s *Store) LatestOf(model, user string) (profile.Record, bool, error) {
	var blob string
	err := s.h.DB().QueryRow(`SELECT record FROM profiles WHERE model = ? AND user = ?
		ORDER BY finished DESC, received DESC LIMIT 1`, model, user).Scan(&blob)
	if errors.Is(err, sql.ErrNoRows) {
		return profile.Record{}, false, nil
	}
	if err != nil {
		return profile.Record{}, false, fmt.Errorf("%w: latest profile of %q by %q: %v", ErrStore, model, user, err)
	}
	rec, err := decode(blob)
	return rec, err == nil, err
}

// eachRecord decodes every profile record query selects and hands it to
// add; what names the load in errors.
func (s *Store) eachRecord(what, query string, add func(profile.Record)) error {
	rows, err := s.h.DB().Query(query)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStore, what, err)
	}
	defer rows.Close()
	for rows.Next() {
		var blob string
		if err := rows.Scan(&blob); err != nil {
			return fmt.Errorf("%w: scan profile: %v", ErrStore, err)
		}
		rec, err := decode(blob)
		if err != nil {
			return err
		}
		add(rec)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrStore, what, err)
	}
	return nil
}

// Throughputs is model → GPU type → per-GPU throughput
// (profile.Record.PerGPUThroughput) of the model's latest profile on each
// type: the "profiled" link of priority.Speeds. Profiles whose throughput
// does not compare across types are left out.
func (s *Store) Throughputs() (map[string]map[string]float64, error) {
	recs, err := s.LatestByType()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for _, r := range recs {
		addThroughput(out, r)
	}
	return out, nil
}

// addThroughput puts rec's per-GPU throughput into m under its model and
// lower-case type, when it has one.
func addThroughput(m map[string]map[string]float64, rec profile.Record) bool {
	tput, ok := rec.PerGPUThroughput()
	if !ok {
		return false
	}
	model := strings.ToLower(rec.Model) // as priority.Speeds looks it up
	row := m[model]
	if row == nil {
		row = map[string]float64{}
		m[model] = row
	}
	row[strings.ToLower(rec.GPUType)] = tput
	return true
}

func decode(blob string) (profile.Record, error) {
	var rec profile.Record
	if err := json.Unmarshal([]byte(blob), &rec); err != nil {
		return profile.Record{}, fmt.Errorf("%w: decode stored record: %v", ErrStore, err)
	}
	return rec, nil
}

// Summary describes a model's latest profile, for `lachesis-profiler list`.
type Summary struct {
	Model    string
	Profiles int // how many profiles of the model are stored
	ID       string
	Node     string
	User     string
	GPUs     int
	Finished time.Time
	Points   int // CPU counts swept
	Best     sensitivity.Demand
}

// List summarises every profiled model, by model name.
func (s *Store) List() ([]Summary, error) {
	counts := map[string]int{}
	rows, err := s.h.DB().Query(`SELECT model, count(*) FROM profiles GROUP BY model`)
	if err != nil {
		return nil, fmt.Errorf("%w: list profiles: %v", ErrStore, err)
	}
	for rows.Next() {
		var m string
		var n int
		if err := rows.Scan(&m, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("%w: list profiles: %v", ErrStore, err)
		}
		counts[m] = n
	}
	rows.Close()
	latest, err := s.LatestAll()
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(latest))
	for model, r := range latest {
		out = append(out, Summary{
			Model: model, Profiles: counts[model], ID: r.ID, Node: r.Node, User: r.User,
			GPUs: r.GPUs, Finished: r.Finished, Points: len(r.CPUSweep), Best: r.Best,
		})
	}
	slices.SortFunc(out, func(a, b Summary) int { return cmp.Compare(a.Model, b.Model) })
	return out, nil
}

// MissingKey is a model key seen in submitted jobs with no profile.
type MissingKey struct {
	Key       string
	Jobs      int
	FirstSeen time.Time
	LastSeen  time.Time
}

// NoteModelKeys adds counts (model key → jobs submitted with it) seen at at.
func (s *Store) NoteModelKeys(counts map[string]int, at time.Time) error {
	if len(counts) == 0 {
		return nil
	}
	tx, err := s.h.DB().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	st, err := tx.Prepare(`INSERT INTO model_keys (key, first_seen, last_seen, jobs) VALUES (?,?,?,?)
		ON CONFLICT(key) DO UPDATE SET
			first_seen = min(first_seen, excluded.first_seen),
			last_seen  = max(last_seen, excluded.last_seen),
			jobs       = jobs + excluded.jobs`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer st.Close()
	sec := at.Unix()
	for k, n := range counts {
		if k == "" || n <= 0 {
			continue
		}
		if _, err := st.Exec(k, sec, sec, n); err != nil {
			return fmt.Errorf("%w: note model key %q: %v", ErrStore, k, err)
		}
	}
	// Job names stand in for keys a user did not set, and most are seen
	// once: keep the table to the MaxModelKeys most submitted.
	if _, err := tx.Exec(`DELETE FROM model_keys WHERE key IN (
		SELECT key FROM model_keys ORDER BY jobs ASC, last_seen ASC
		LIMIT max(0, (SELECT count(*) FROM model_keys) - ?))`, MaxModelKeys); err != nil {
		return fmt.Errorf("%w: bound model keys: %v", ErrStore, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// MaxModelKeys bounds the model keys kept for `lachesis-profiler missing`;
// beyond it the least submitted (then least recently seen) go first.
const MaxModelKeys = 10000

// Missing lists model keys seen in submitted jobs that have no profile,
// most-submitted first, then those waiting longest for one (earliest
// first seen).
func (s *Store) Missing() ([]MissingKey, error) {
	rows, err := s.h.DB().Query(`SELECT key, jobs, first_seen, last_seen FROM model_keys
		WHERE key NOT IN (SELECT model FROM profiles)
		ORDER BY jobs DESC, first_seen ASC, key`)
	if err != nil {
		return nil, fmt.Errorf("%w: missing profiles: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []MissingKey
	for rows.Next() {
		var m MissingKey
		var first, last int64
		if err := rows.Scan(&m.Key, &m.Jobs, &first, &last); err != nil {
			return nil, fmt.Errorf("%w: scan model key: %v", ErrStore, err)
		}
		m.FirstSeen, m.LastSeen = time.Unix(first, 0), time.Unix(last, 0)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: missing profiles: %v", ErrStore, err)
	}
	return out, nil
}

// PutTelemetry replaces the node's stored GPU values with the report's.
func (s *Store) PutTelemetry(rep wire.TelemetryReport) error {
	tx, err := s.h.DB().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	st, err := tx.Prepare(`INSERT OR REPLACE INTO gpu_telemetry
		(node, gpu, uuid, name, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, at)
		VALUES (?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer st.Close()
	at := unixNano(rep.At)
	for _, g := range rep.GPUs {
		if _, err := st.Exec(rep.Node, g.Index, g.UUID, g.Name, g.UtilPct, g.MemUsedMB,
			g.MemTotalMB, g.TempC, g.PowerW, at); err != nil {
			return fmt.Errorf("%w: store telemetry of %s GPU %d: %v", ErrStore, rep.Node, g.Index, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// Telemetry returns the latest stored GPU values of node, by GPU index.
func (s *Store) Telemetry(node string) ([]wire.GPU, time.Time, error) {
	rows, err := s.h.DB().Query(`SELECT gpu, uuid, name, util_pct, mem_used_mb, mem_total_mb, temp_c, power_w, at
		FROM gpu_telemetry WHERE node = ? ORDER BY gpu`, node)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: telemetry of %s: %v", ErrStore, node, err)
	}
	defer rows.Close()
	var out []wire.GPU
	var latest int64
	for rows.Next() {
		var g wire.GPU
		var at int64
		if err := rows.Scan(&g.Index, &g.UUID, &g.Name, &g.UtilPct, &g.MemUsedMB, &g.MemTotalMB,
			&g.TempC, &g.PowerW, &at); err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: scan telemetry: %v", ErrStore, err)
		}
		latest = max(latest, at)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("%w: telemetry of %s: %v", ErrStore, node, err)
	}
	return out, time.Unix(0, latest), nil
}

// Count is how many profiles of model are stored (tests and tools use it
// to check that a retried delivery stored one row).
func (s *Store) Count(model string) (int, error) {
	var n int
	if err := s.h.DB().QueryRow(`SELECT count(*) FROM profiles WHERE model = ?`, model).Scan(&n); err != nil {
		return 0, fmt.Errorf("%w: count profiles of %q: %v", ErrStore, model, err)
	}
	return n, nil
}
