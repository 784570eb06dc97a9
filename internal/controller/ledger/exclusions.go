package ledger

import (
	"fmt"
	"strings"
)

// Exclusion is what Lachesis did to one pending job's ExcNodeList
// (gpushare/exclude.go), kept so that a slurmctld restart can still tell the
// user's own nodes from the ones Lachesis added, and lift exactly its own
// once their reason ends.
type Exclusion struct {
	JobID uint32
	// UserRaw is the user's own list as read from Slurm (written back
	// verbatim), UserSet its node names; Ours are the nodes Lachesis
	// added; Applied says Slurm holds UserRaw plus Ours.
	UserRaw string
	UserSet []string
	Ours    []string
	Applied bool
	// Holds are why each node is kept off: a host job on it.
	Holds []ExclusionHold
	// Oversize says the row's text was over MaxExclusionText: its lists
	// are left out (the core skips it).
	Oversize bool
}

// ExclusionHold is one node a job is kept off because of Host: a revert's
// pin (Until, Unix seconds, its end) or the pass's judgement (Until 0).
type ExclusionHold struct {
	Node  string
	Host  uint32
	Until int64
	Why   string
}

// MaxExclusions bounds the exclusions table (the core tracks at most as
// many jobs); the rows saved longest ago go first. MaxExclusionHolds
// bounds one job's holds read back, MaxExclusionText the bytes of one
// row's lists and of one hold's reason.
const (
	MaxExclusions     = 4096
	MaxExclusionHolds = 256
	MaxExclusionText  = 64 << 10
)

// exclusionsSchema is applied at every open (a ledger written before it
// starts with none). Node lists are comma-separated (a node name has no
// comma).
const exclusionsSchema = `
CREATE TABLE IF NOT EXISTS exclusions (
	job_id   INTEGER PRIMARY KEY,
	user_raw TEXT    NOT NULL,
	user_set TEXT    NOT NULL,
	ours     TEXT    NOT NULL,
	applied  INTEGER NOT NULL,
	saved    INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS exclusion_holds (
	job_id INTEGER NOT NULL,
	node   TEXT    NOT NULL,
	host   INTEGER NOT NULL,
	until  INTEGER NOT NULL,
	why    TEXT    NOT NULL,
	PRIMARY KEY (job_id, node)
);
`

// ExclusionStore keeps exclusions across slurmctld restarts; SQLite is
// one. The core asks for it with a type assertion.
type ExclusionStore interface {
	// SaveExclusions replaces the rows of save and deletes those of drop.
	SaveExclusions(save []Exclusion, drop []uint32) error
	// Exclusions returns the stored rows, at most MaxExclusions.
	Exclusions() ([]Exclusion, error)
}

var _ ExclusionStore = (*SQLite)(nil)

// SaveExclusions writes save (each job's holds replaced), deletes drop,
// and keeps the MaxExclusions rows saved last, in one transaction. saved
// orders rows for the bound: it only grows, one per row written.
func (s *SQLite) SaveExclusions(save []Exclusion, drop []uint32) error {
	if len(save) == 0 && len(drop) == 0 {
		return nil
	}
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	var seq int64
	if err := tx.QueryRow(`SELECT coalesce(max(saved), 0) FROM exclusions`).Scan(&seq); err != nil {
		return fmt.Errorf("%w: exclusions: %v", ErrStore, err)
	}
	delHolds, err := tx.Prepare(`DELETE FROM exclusion_holds WHERE job_id = ?`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer delHolds.Close()
	for _, id := range drop {
		if _, err := tx.Exec(`DELETE FROM exclusions WHERE job_id = ?`, id); err != nil {
			return fmt.Errorf("%w: drop exclusion of job %d: %v", ErrStore, id, err)
		}
		if _, err := delHolds.Exec(id); err != nil {
			return fmt.Errorf("%w: drop exclusion of job %d: %v", ErrStore, id, err)
		}
	}
	ins, err := tx.Prepare(`INSERT OR REPLACE INTO exclusions (job_id, user_raw, user_set, ours, applied, saved) VALUES (?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer ins.Close()
	insHold, err := tx.Prepare(`INSERT OR REPLACE INTO exclusion_holds (job_id, node, host, until, why) VALUES (?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer insHold.Close()
	for _, e := range save {
		seq++
		if _, err := ins.Exec(e.JobID, e.UserRaw, strings.Join(e.UserSet, ","), strings.Join(e.Ours, ","), e.Applied, seq); err != nil {
			return fmt.Errorf("%w: save exclusion of job %d: %v", ErrStore, e.JobID, err)
		}
		if _, err := delHolds.Exec(e.JobID); err != nil {
			return fmt.Errorf("%w: save exclusion of job %d: %v", ErrStore, e.JobID, err)
		}
		for _, h := range e.Holds {
			if _, err := insHold.Exec(e.JobID, h.Node, h.Host, h.Until, h.Why); err != nil {
				return fmt.Errorf("%w: save exclusion of job %d: %v", ErrStore, e.JobID, err)
			}
		}
	}
	if _, err := tx.Exec(`DELETE FROM exclusions WHERE job_id NOT IN (
		SELECT job_id FROM exclusions ORDER BY saved DESC, job_id DESC LIMIT ?)`, MaxExclusions); err != nil {
		return fmt.Errorf("%w: bound exclusions: %v", ErrStore, err)
	}
	if _, err := tx.Exec(`DELETE FROM exclusion_holds WHERE job_id NOT IN (SELECT job_id FROM exclusions)`); err != nil {
		return fmt.Errorf("%w: bound exclusions: %v", ErrStore, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// Exclusions returns the stored rows, the newest MaxExclusions, each with
// at most MaxExclusionHolds holds. The file is hostile too: every column
// is cast to the type it is read as, and text over MaxExclusionText is
// not read (the row comes back Oversize, a hold is left out); the core
// validates the rest.
func (s *SQLite) Exclusions() ([]Exclusion, error) {
	rows, err := s.conn().Query(`SELECT CAST(job_id AS INTEGER),
		length(CAST(user_raw AS TEXT)) + length(CAST(user_set AS TEXT)) + length(CAST(ours AS TEXT)) > ?1,
		CASE WHEN length(CAST(user_raw AS TEXT)) + length(CAST(user_set AS TEXT)) + length(CAST(ours AS TEXT)) > ?1 THEN ''
			ELSE coalesce(CAST(user_raw AS TEXT), '') || char(0) || coalesce(CAST(user_set AS TEXT), '') || char(0) || coalesce(CAST(ours AS TEXT), '') END,
		coalesce(CAST(applied AS INTEGER), 0)
		FROM exclusions ORDER BY saved DESC, job_id DESC LIMIT ?2`, MaxExclusionText, MaxExclusions)
	if err != nil {
		return nil, fmt.Errorf("%w: load exclusions: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []Exclusion
	index := map[uint32]int{}
	for rows.Next() {
		var (
			id       int64
			oversize bool
			text     string
			applied  int64
		)
		if err := rows.Scan(&id, &oversize, &text, &applied); err != nil {
			return nil, fmt.Errorf("%w: scan exclusion: %v", ErrStore, err)
		}
		if id <= 0 || id > 1<<32-1 {
			continue
		}
		e := Exclusion{JobID: uint32(id), Applied: applied != 0, Oversize: oversize}
		if !oversize {
			parts := strings.SplitN(text, "\x00", 3)
			if len(parts) == 3 {
				e.UserRaw, e.UserSet, e.Ours = parts[0], splitList(parts[1]), splitList(parts[2])
			} else {
				e.Oversize = true
			}
		}
		index[e.JobID] = len(out)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load exclusions: %v", ErrStore, err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	holds, err := s.conn().Query(`SELECT CAST(job_id AS INTEGER), coalesce(CAST(node AS TEXT), ''),
		coalesce(CAST(host AS INTEGER), 0), coalesce(CAST(until AS INTEGER), 0), coalesce(CAST(why AS TEXT), '')
		FROM exclusion_holds WHERE length(CAST(node AS TEXT)) + length(CAST(why AS TEXT)) <= ?1
		ORDER BY job_id, node LIMIT ?2`, MaxExclusionText, MaxExclusions*MaxExclusionHolds)
	if err != nil {
		return nil, fmt.Errorf("%w: load exclusion holds: %v", ErrStore, err)
	}
	defer holds.Close()
	for holds.Next() {
		var (
			id, host int64
			h        ExclusionHold
		)
		if err := holds.Scan(&id, &h.Node, &host, &h.Until, &h.Why); err != nil {
			return nil, fmt.Errorf("%w: scan exclusion hold: %v", ErrStore, err)
		}
		if id <= 0 || id > 1<<32-1 || host <= 0 || host > 1<<32-1 {
			continue
		}
		k, ok := index[uint32(id)]
		if !ok || len(out[k].Holds) >= MaxExclusionHolds {
			continue
		}
		h.Host = uint32(host)
		out[k].Holds = append(out[k].Holds, h)
	}
	if err := holds.Err(); err != nil {
		return nil, fmt.Errorf("%w: load exclusion holds: %v", ErrStore, err)
	}
	return out, nil
}

// splitList is a comma-separated list's items ("" is none).
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
