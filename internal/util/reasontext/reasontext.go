// Package reasontext builds the human-readable reasons Lachesis writes
// into a job's AdminComment (sizing, placement, the fallback's shrink).
//
// An AdminComment also carries Lachesis's machine-readable markers, e.g.
// "[lachesis:sized cpus=… mem=…]", which a later privileged update reads
// back. Text a user chose (job name, comment, model key, partition) is
// copied into those reasons, so it must never be able to spell a marker:
// Field drops '[' and ']' from it, and control characters too, which would
// otherwise reach an admin's terminal raw through `scontrol show job`.
// The C side (lachesis_hook_append_reason) applies the same rule to every
// reason it appends, whatever the core returned.
package reasontext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis ends a clipped text.
const Ellipsis = "…"

// WaitingPrefix starts every reason Lachesis gives Slurm for a waiting job
// (its state_desc, squeue's %R: a refused preemption, a waiting guest;
// cgo/lachesis_core.h LACHESIS_REASON_PREFIX): the plugin replaces or
// clears only a state_desc that starts with it.
const WaitingPrefix = "Lachesis: "

// Field is user-chosen text for a reason: without '[', ']' and control
// characters (Unicode Cc, which includes newlines, tabs, DEL and the C1
// range; invalid UTF-8 is dropped too), cut to at most max bytes (plus
// Ellipsis when cut).
func Field(s string, max int) string {
	return Clip(Clean(s), max)
}

// Clean drops '[', ']', control characters and invalid UTF-8 from s.
func Clean(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToValidUTF8(s, "") {
		if !dropped(r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func clean(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if dropped(r) {
			return false
		}
	}
	return true
}

func dropped(r rune) bool { return r == '[' || r == ']' || unicode.IsControl(r) }

// Clip cuts s to at most max bytes, on a rune boundary, ending it with
// Ellipsis (counted in max) when it was cut.
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max - len(Ellipsis)
	if n < 0 {
		n = 0
	}
	return strings.ToValidUTF8(s[:n], "") + Ellipsis
}
