package printable

import "testing"

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bert-large", "bert-large"},
		{"résumé 模型", "résumé 模型"},
		{"\x1b]0;owned\x07\x1b[2Jx", "]0;owned[2Jx"},
		{"a\tb\nc\rd\x7f\u0085e", "abcde"},
		{"evil\u202egnp.exe", "evilgnp.exe"},
		{"bad\xffutf8", "badutf8"},
		{"", ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
