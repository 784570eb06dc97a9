package quota

import (
	"errors"
	"strings"
	"testing"
)

func TestInDescription(t *testing.T) {
	long := strings.Repeat("x", MaxDescription)
	for _, tc := range []struct {
		name, desc string
		want       Spec
		found      bool
		bad        string // in the error; "" = none
	}{
		{"no marker: no quota", "vision lab", Spec{}, false, ""},
		{"empty: no quota", "", Spec{}, false, ""},
		{"after other text", "vision lab; lachesis-quota=2 nodes of 8 gpus", Spec{2, 8, true}, true, ""},
		{"before other text, up to the semicolon", "lachesis-quota=16 GPUs in cells of 4; nlp group", Spec{4, 4, false}, true, ""},
		{"any case, spaces around the equals sign", "LACHESIS-QUOTA =  4 GPUs ", Spec{4, 1, false}, true, ""},
		{"a bar in the text before it", "a|b; lachesis-quota=1 node of 4 gpus", Spec{1, 4, true}, true, ""},
		{"a long description with the marker inside the bound", strings.Repeat("y", 900) + "; lachesis-quota=2 gpus", Spec{2, 1, false}, true, ""},
		{"a huge description without a marker: no quota", strings.Repeat("z", 64<<10), Spec{}, false, ""},
		{"a bad text refused", "lachesis-quota=lots", Spec{}, true, "lots"},
		{"an empty text refused", "lab; lachesis-quota= ; x", Spec{}, true, "is empty"},
		{"no equals sign refused", "lachesis-quota 2 gpus", Spec{}, true, `followed by "="`},
		{"a lookalike key refused, not ignored", "lachesis-quotas=2 gpus", Spec{}, true, `followed by "="`},
		{"the marker twice refused", "lachesis-quota=2 gpus; lachesis-quota=64 gpus", Spec{}, true, "2 times"},
		{"the marker twice, the second past the bound, refused", "lachesis-quota=2 gpus;" + long + "lachesis-quota=64 gpus", Spec{}, true, "2 times"},
		{"the marker past the bound refused", long + "; lachesis-quota=2 gpus", Spec{}, true, "first 1024 bytes"},
		{"a text running past the bound refused", strings.Repeat("y", 1000) + "lachesis-quota=2 nodes of 8 gpus", Spec{}, true, "runs past"},
		{"a newline in the text refused", "lachesis-quota=2 nodes\nof 8 gpus", Spec{}, true, "control character"},
		{"a tab in the text refused", "lachesis-quota=2\tgpus", Spec{}, true, "control character"},
		{"an escape sequence refused, quoted", "lachesis-quota=2 gpus\x1b[2J", Spec{}, true, `\x1b`},
		{"a newline after the text is another part", "lachesis-quota=2 gpus;\nlab", Spec{2, 1, false}, true, ""},
		{"a text over 64 bytes refused", "lachesis-quota=" + strings.Repeat("9", 70) + " gpus", Spec{}, true, "at most 64"},
		{"invalid UTF-8 before the marker keeps offsets", "\xff\xfe; lachesis-quota=3 gpus", Spec{3, 1, false}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, err := InDescription(tc.desc)
			if found != tc.found {
				t.Fatalf("found %v, want %v (%v)", found, tc.found, err)
			}
			if tc.bad != "" {
				if !errors.Is(err, ErrBadQuota) || !strings.Contains(err.Error(), tc.bad) || len(err.Error()) > 300 {
					t.Fatalf("got %+v, %v; want a bounded ErrBadQuota saying %q", got, err, tc.bad)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestAccountName(t *testing.T) {
	for name, want := range map[string]string{"Vision": "vision", "nlp-2": "nlp-2", "a_b.c": "a_b.c"} {
		if got, err := AccountName(name); err != nil || got != want {
			t.Errorf("AccountName(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, bad := range []string{"", "a b", "a,b", "a\tb", "a\nb", "a\x1b", "a\x7f", strings.Repeat("a", MaxAccountLen+1)} {
		if _, err := AccountName(bad); !errors.Is(err, ErrBadQuota) {
			t.Errorf("AccountName(%q): %v, want ErrBadQuota", bad, err)
		}
	}
}
