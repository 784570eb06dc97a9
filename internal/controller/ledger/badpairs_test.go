package ledger

import (
	"database/sql"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

func TestBadPairsAreKeptPerUsersAndStayBounded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SaveBadPairs([]BadPair{{"a", "b", "1", "2", 10}, {"a", "c", "1", "1", 20}, {"a", "b", "3", "3", 5}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveBadPairs([]BadPair{{"a", "b", "1", "2", 30}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.BadPairs()
	want := []BadPair{{"a", "b", "1", "2", 30}, {"a", "c", "1", "1", 20}, {"a", "b", "3", "3", 5}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%+v %v; want %+v: a/b once per pair of users, its users' mark renewed", got, err, want)
	}
	many := make([]BadPair, MaxBadPairs+10)
	for i := range many {
		many[i] = BadPair{"h", "g" + strconv.Itoa(i), "1", "2", int64(100 + i)}
	}
	if err := s.SaveBadPairs(many); err != nil {
		t.Fatal(err)
	}
	got, err = s.BadPairs()
	if err != nil || len(got) != MaxBadPairs || got[0].At != int64(100+MaxBadPairs+9) {
		t.Fatalf("%d pairs (newest %+v), %v; want the newest %d", len(got), got[0], err, MaxBadPairs)
	}
}

// A ledger written before marks named their users (bad_pairs) opens, its
// unattributed rows are dropped (they could only apply to everyone), and
// marks are kept from then on.
func TestALedgerWithUnattributedBadPairsOpensWithoutThem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l.db")
	old, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(`CREATE TABLE bad_pairs (host TEXT NOT NULL, guest TEXT NOT NULL, marked INTEGER NOT NULL, PRIMARY KEY (host, guest));
		INSERT INTO bad_pairs VALUES ('resnet50', 'bert', 10)`); err != nil {
		t.Fatal(err)
	}
	old.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.BadPairs(); err != nil || len(got) != 0 {
		t.Fatalf("%+v %v; want none: the old rows name no users", got, err)
	}
	if err := s.SaveBadPairs([]BadPair{{"resnet50", "bert", "1", "1", 20}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BadPairs(); err != nil || len(got) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
}
