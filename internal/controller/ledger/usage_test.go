package ledger

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

func sortedUsage(u []AccountUsage) []AccountUsage {
	slices.SortFunc(u, func(a, b AccountUsage) int { return strings.Compare(a.Account, b.Account) })
	return u
}

func TestUsageSurvivesReopenAndSaveReplacesTheTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	first := []AccountUsage{{"physics", 1200.5, 100}, {"biology", 30, 100}}
	if err := s.SaveUsage(first); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Usage()
	if err != nil || !slices.Equal(sortedUsage(got), sortedUsage(first)) {
		t.Fatalf("after reopen Usage() = %v, %v; want %v", got, err, first)
	}
	// A later save is the whole table: biology decayed away and is gone.
	second := []AccountUsage{{"physics", 600, 200}}
	if err := s.SaveUsage(second); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Usage(); err != nil || !slices.Equal(got, second) {
		t.Fatalf("after second save Usage() = %v, %v; want %v", got, err, second)
	}
}

func TestOpenOfALedgerFromBeforeFairShareKeepsItsJobsAndHasNoUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	// The schema as it was before account_usage existed.
	old := strings.TrimSuffix(schema, usageSchema)
	if old == schema {
		t.Fatal("test needs the schema to end with usageSchema")
	}
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, old)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	pre, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Write a job through the old table, then drop the new one again so
	// the file is exactly an old ledger with a job in it.
	if err := pre.Save([]Record{{JobID: 7, FirstSubmit: 1, Account: priority.Account{ServiceClosed: 42}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pre.conn().Exec(`DROP TABLE account_usage`); err != nil {
		t.Fatal(err)
	}
	pre.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if u, err := s.Usage(); err != nil || len(u) != 0 {
		t.Fatalf("Usage() of an old ledger = %v, %v; want none", u, err)
	}
	if r, ok, err := s.Get(7); err != nil || !ok || r.ServiceClosed != 42 {
		t.Fatalf("old job = %+v, %v, %v; want service 42 kept", r, ok, err)
	}
	if err := s.SaveUsage([]AccountUsage{{"a", 1, 2}}); err != nil {
		t.Fatalf("saving usage into a migrated ledger: %v", err)
	}
}
