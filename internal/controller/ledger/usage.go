package ledger

import "fmt"

// AccountUsage is one account's fair-share usage: attained GPU-seconds
// decayed (priority.DecayUsage) up to At, Unix seconds. It is kept so that
// a slurmctld restart does not hand every account a clean slate.
type AccountUsage struct {
	Account string
	Usage   float64
	At      int64
}

// usageSchema is applied with the rest of the schema at every open; being
// CREATE ... IF NOT EXISTS, it is also the migration of a ledger written
// before fair share existed, which simply starts with no usage.
const usageSchema = `
CREATE TABLE IF NOT EXISTS account_usage (
	account TEXT    PRIMARY KEY,
	usage   REAL    NOT NULL,
	updated INTEGER NOT NULL
);
`

// Usage returns every account's stored usage.
func (s *SQLite) Usage() ([]AccountUsage, error) {
	rows, err := s.conn().Query(`SELECT account, usage, updated FROM account_usage`)
	if err != nil {
		return nil, fmt.Errorf("%w: load account usage: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []AccountUsage
	for rows.Next() {
		var u AccountUsage
		if err := rows.Scan(&u.Account, &u.Usage, &u.At); err != nil {
			return nil, fmt.Errorf("%w: scan account usage: %v", ErrStore, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load account usage: %v", ErrStore, err)
	}
	return out, nil
}

// SaveUsage replaces the stored usage with usage, in one transaction: the
// table is the core's whole table of accounts, which forgets accounts whose
// usage has decayed away.
func (s *SQLite) SaveUsage(usage []AccountUsage) error {
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.Exec(`DELETE FROM account_usage`); err != nil {
		return fmt.Errorf("%w: clear account usage: %v", ErrStore, err)
	}
	ins, err := tx.Prepare(`INSERT OR REPLACE INTO account_usage (account, usage, updated) VALUES (?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer ins.Close()
	for _, u := range usage {
		if _, err := ins.Exec(u.Account, u.Usage, u.At); err != nil {
			return fmt.Errorf("%w: save usage of account %q: %v", ErrStore, u.Account, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}
