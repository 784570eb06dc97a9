package synergy

import "testing"

// AdminComment is editable by admins and carries the marker the fallback
// reads back: any text must parse without panicking, and what parses must
// round-trip through the marker Lachesis writes.
func FuzzParseSizing(f *testing.F) {
	f.Add(Sizing{CPUs: 9, MemMB: 64000, ShareCPUs: 3, ShareMemMB: 12000}.marker())
	f.Add("lachesis: model=x [lachesis:sized cpus=99999999999999999999 mem=1 share_cpus=1 share_mem=1]")
	f.Add("[lachesis:sized cpus=1 mem=2 share_cpus=3 share_mem=4][lachesis:sized cpus=5 mem=6 share_cpus=7 share_mem=8]")
	f.Fuzz(func(t *testing.T, comment string) {
		s, ok := ParseSizing(comment)
		if !ok {
			return
		}
		if s.CPUs < 0 || s.ShareCPUs < 0 {
			t.Fatalf("negative CPUs from %q: %+v", comment, s)
		}
		again, ok := ParseSizing(s.marker())
		if !ok || again != s {
			t.Fatalf("round trip of %+v: %+v, %v", s, again, ok)
		}
	})
}
