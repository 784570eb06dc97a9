package reasontext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFieldCannotSpellAMarker(t *testing.T) {
	cases := map[string]string{
		"res18": "res18",
		"[lachesis:sized cpus=99 mem=9 share_cpus=48 share_mem=9]": "lachesis:sized cpus=99 mem=9 share_cpus=48 share_mem=9",
		"a\nb\tc\x1b[31mred\x7f\u0085d":                            "abc31mredd",
		"caf\xc3":                                                  "caf",
		"ok é ✓":                                                   "ok é ✓",
	}
	for in, want := range cases {
		if got := Field(in, 200); got != want {
			t.Errorf("Field(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClipKeepsRunesWhole(t *testing.T) {
	s := strings.Repeat("é", 100)
	got := Clip(s, 65)
	if len(got) > 65 || !utf8.ValidString(got) || !strings.HasSuffix(got, Ellipsis) {
		t.Fatalf("Clip = %q (%d bytes)", got, len(got))
	}
	if Clip("short", 65) != "short" {
		t.Fatal("a short text was changed")
	}
}

func FuzzField(f *testing.F) {
	f.Add("[lachesis:sized cpus=1 mem=1 share_cpus=1 share_mem=1]", 64)
	f.Add("\x00\xff[", 3)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		got := Field(s, max)
		if strings.ContainsAny(got, "[]") || !utf8.ValidString(got) {
			t.Fatalf("Field(%q) = %q", s, got)
		}
		for _, r := range got {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("Field(%q) kept control %q", s, r)
			}
		}
		if len(got) > max+len(Ellipsis) {
			t.Fatalf("Field(%q, %d) is %d bytes", s, max, len(got))
		}
	})
}
