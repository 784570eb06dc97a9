package ledger

import (
	"path/filepath"
	"strconv"
	"testing"
)

func TestBadPairsKeepTheFirstMarkAndStayBounded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SaveBadPairs([]BadPair{{"a", "b", 10}, {"a", "c", 20}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveBadPairs([]BadPair{{"a", "b", 30}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.BadPairs()
	if err != nil || len(got) != 2 || got[0] != (BadPair{"a", "c", 20}) || got[1] != (BadPair{"a", "b", 10}) {
		t.Fatalf("%+v %v; want both pairs, a/b with its first mark", got, err)
	}
	many := make([]BadPair, MaxBadPairs+10)
	for i := range many {
		many[i] = BadPair{"h", "g" + strconv.Itoa(i), int64(100 + i)}
	}
	if err := s.SaveBadPairs(many); err != nil {
		t.Fatal(err)
	}
	got, err = s.BadPairs()
	if err != nil || len(got) != MaxBadPairs || got[0].At != int64(100+MaxBadPairs+9) {
		t.Fatalf("%d pairs (newest %+v), %v; want the newest %d", len(got), got[0], err, MaxBadPairs)
	}
}
