package ledger

import "fmt"

// BadPair is a pair of models introspection saw hurt: the guaranteed
// job's model (Host) lost more than sharing.max_slowdown beside the
// opportunistic job's (Guest). At is when it was first marked, Unix
// seconds.
type BadPair struct {
	Host, Guest string
	At          int64
}

// MaxBadPairs bounds the bad_pairs table: the core's pair table holds at
// most this many pairs (sharing.DefaultLimits), so more could not be
// loaded anyway. The oldest marks go first.
const MaxBadPairs = 16384

// BadPairStore keeps bad pairs across slurmctld restarts; SQLite is one.
type BadPairStore interface {
	SaveBadPairs(pairs []BadPair) error
	BadPairs() ([]BadPair, error)
}

// badPairsSchema is applied at every open (a ledger written before it
// simply starts with none).
const badPairsSchema = `
CREATE TABLE IF NOT EXISTS bad_pairs (
	host   TEXT    NOT NULL,
	guest  TEXT    NOT NULL,
	marked INTEGER NOT NULL,
	PRIMARY KEY (host, guest)
);
`

// SaveBadPairs adds pairs (an existing pair keeps its first mark) and
// keeps the newest MaxBadPairs, in one transaction.
func (s *SQLite) SaveBadPairs(pairs []BadPair) error {
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	ins, err := tx.Prepare(`INSERT OR IGNORE INTO bad_pairs (host, guest, marked) VALUES (?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer ins.Close()
	for _, p := range pairs {
		if _, err := ins.Exec(p.Host, p.Guest, p.At); err != nil {
			return fmt.Errorf("%w: save bad pair: %v", ErrStore, err)
		}
	}
	if _, err := tx.Exec(`DELETE FROM bad_pairs WHERE rowid NOT IN (SELECT rowid FROM bad_pairs ORDER BY marked DESC, rowid DESC LIMIT ?)`, MaxBadPairs); err != nil {
		return fmt.Errorf("%w: trim bad pairs: %v", ErrStore, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// BadPairs returns the stored bad pairs, at most MaxBadPairs.
func (s *SQLite) BadPairs() ([]BadPair, error) {
	rows, err := s.conn().Query(`SELECT host, guest, marked FROM bad_pairs ORDER BY marked DESC LIMIT ?`, MaxBadPairs)
	if err != nil {
		return nil, fmt.Errorf("%w: load bad pairs: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []BadPair
	for rows.Next() {
		var p BadPair
		if err := rows.Scan(&p.Host, &p.Guest, &p.At); err != nil {
			return nil, fmt.Errorf("%w: scan bad pair: %v", ErrStore, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load bad pairs: %v", ErrStore, err)
	}
	return out, nil
}
