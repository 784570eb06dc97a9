package ledger

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestExclusionsAreReplacedDroppedAndBounded(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "l.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := Exclusion{JobID: 2, UserRaw: "u[1-2]", UserSet: []string{"u1", "u2"}, Ours: []string{"n1"}, Applied: true,
		Holds: []ExclusionHold{{Node: "n1", Host: 1, Until: 0, Why: "beside job 1"}, {Node: "n2", Host: 3, Until: 5000, Why: "pinned"}}}
	b := Exclusion{JobID: 4, Ours: []string{"n9"}, Applied: true, Holds: []ExclusionHold{{Node: "n9", Host: 5, Why: "x"}}}
	if err := s.SaveExclusions([]Exclusion{a, b}, nil); err != nil {
		t.Fatal(err)
	}
	a.Holds = a.Holds[1:] // a's holds are replaced, b is dropped
	if err := s.SaveExclusions([]Exclusion{a}, []uint32{4}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Exclusions()
	if err != nil || len(got) != 1 || fmt.Sprintf("%+v", got[0]) != fmt.Sprintf("%+v", a) {
		t.Fatalf("%+v %v; want only %+v", got, err, a)
	}
	// A row over the text bound comes back Oversize, without its lists.
	big := Exclusion{JobID: 6, UserRaw: strings.Repeat("u", MaxExclusionText+1)}
	if err := s.SaveExclusions([]Exclusion{big}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err = s.Exclusions(); err != nil || len(got) != 2 || got[0].JobID != 6 || !got[0].Oversize || got[0].UserRaw != "" {
		t.Fatalf("%+v %v; want job 6 first, Oversize, no text", got, err)
	}
	many := make([]Exclusion, MaxExclusions+5)
	for i := range many {
		many[i] = Exclusion{JobID: uint32(100 + i), Holds: []ExclusionHold{{Node: "n1", Host: 1}}}
	}
	if err := s.SaveExclusions(many, nil); err != nil {
		t.Fatal(err)
	}
	got, err = s.Exclusions()
	if err != nil || len(got) != MaxExclusions || got[0].JobID != uint32(100+MaxExclusions+4) {
		t.Fatalf("%d rows (newest %+v), %v; want the %d saved last", len(got), got[0], err, MaxExclusions)
	}
	var holds int
	if err := s.conn().QueryRow(`SELECT count(*) FROM exclusion_holds`).Scan(&holds); err != nil || holds != MaxExclusions {
		t.Fatalf("%d holds, %v; want one per kept row", holds, err)
	}
}
