// Package printable makes user-controlled text safe to print on an
// admin's terminal: a job name, model key or node name may carry escape
// sequences that retitle the window, recolour or clear the screen, or
// (bidirectional overrides) make one name look like another.
package printable

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s without control characters (C0, DEL, C1: ESC and so
// every terminal escape sequence loses its introducer; tabs and newlines,
// which would break a table's rows), Unicode format characters (the
// bidirectional overrides and isolates, zero-width joiners) and invalid
// UTF-8. Printable text comes back unchanged, without a copy.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if keep(r, size) {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func clean(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !keep(r, size) {
			return false
		}
		i += size
	}
	return true
}

func keep(r rune, size int) bool {
	if r == utf8.RuneError && size <= 1 {
		return false
	}
	return !unicode.IsControl(r) && !unicode.Is(unicode.Cf, r)
}
