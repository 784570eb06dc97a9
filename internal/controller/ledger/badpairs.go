package ledger

import "fmt"

// BadPair is a pair of models introspection saw hurt: the guaranteed
// job's model (Host) lost more than sharing.max_slowdown beside the
// opportunistic job's (Guest). HostUser and GuestUser are who measured it:
// the users (uids, decimal) whose jobs were the host and the guest; the
// mark applies to those users' jobs (sharing.Party, issue 34). At is when
// it was last marked, Unix seconds (sharing.pair_mark_ttl counts from it).
type BadPair struct {
	Host, Guest         string
	HostUser, GuestUser string
	At                  int64
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
// simply starts with none). bad_pair_marks replaced bad_pairs (issue 34):
// a mark is kept per pair of models and per pair of users who measured it.
// The older table's rows name no users, so they could only have applied
// to everyone, which no mark may do alone any more: it is dropped, and a
// pair those rows marked is measured again by introspection.
const badPairsSchema = `
DROP TABLE IF EXISTS bad_pairs;
CREATE TABLE IF NOT EXISTS bad_pair_marks (
	host       TEXT    NOT NULL,
	guest      TEXT    NOT NULL,
	host_user  TEXT    NOT NULL,
	guest_user TEXT    NOT NULL,
	marked     INTEGER NOT NULL,
	PRIMARY KEY (host, guest, host_user, guest_user)
);
`

// SaveBadPairs adds pairs (a pair its users marked before takes the later
// time) and keeps the newest MaxBadPairs, in one transaction.
func (s *SQLite) SaveBadPairs(pairs []BadPair) error {
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	ins, err := tx.Prepare(`INSERT INTO bad_pair_marks (host, guest, host_user, guest_user, marked) VALUES (?,?,?,?,?)
		ON CONFLICT (host, guest, host_user, guest_user) DO UPDATE SET marked = max(marked, excluded.marked)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer ins.Close()
	for _, p := range pairs {
		if _, err := ins.Exec(p.Host, p.Guest, p.HostUser, p.GuestUser, p.At); err != nil {
			return fmt.Errorf("%w: save bad pair: %v", ErrStore, err)
		}
	}
	if _, err := tx.Exec(`DELETE FROM bad_pair_marks WHERE rowid NOT IN (SELECT rowid FROM bad_pair_marks ORDER BY marked DESC, rowid DESC LIMIT ?)`, MaxBadPairs); err != nil {
		return fmt.Errorf("%w: trim bad pairs: %v", ErrStore, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// BadPairs returns the stored bad pairs, at most MaxBadPairs, newest
// first. The file is hostile too: every column is cast and its text cut
// (names to 256 bytes, users to 32), so the caller's checks refuse what
// is wrong without a huge row ever being read whole.
func (s *SQLite) BadPairs() ([]BadPair, error) {
	rows, err := s.conn().Query(`SELECT substr(CAST(host AS TEXT), 1, 256), substr(CAST(guest AS TEXT), 1, 256),
		substr(CAST(host_user AS TEXT), 1, 32), substr(CAST(guest_user AS TEXT), 1, 32), CAST(marked AS INTEGER)
		FROM bad_pair_marks ORDER BY marked DESC LIMIT ?`, MaxBadPairs)
	if err != nil {
		return nil, fmt.Errorf("%w: load bad pairs: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []BadPair
	for rows.Next() {
		var p BadPair
		if err := rows.Scan(&p.Host, &p.Guest, &p.HostUser, &p.GuestUser, &p.At); err != nil {
			return nil, fmt.Errorf("%w: scan bad pair: %v", ErrStore, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load bad pairs: %v", ErrStore, err)
	}
	return out, nil
}
