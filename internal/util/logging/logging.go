// Package logging is a log/slog handler that hands each record, formatted
// as one "msg key=value ..." line, to a Sink. The plugins' sink writes into
// slurmctld's log; tests use a buffer.
//
// Values carry text users choose (job names, model keys, comments, errors
// that quote them), so the handler, the one place where a line is made,
// keeps every line one line of printable text: a value is quoted (Go
// syntax, strconv.Quote) whenever it holds anything but printable text
// without spaces, quotes, '=' or '\', so newlines, carriage returns, escape
// sequences, bidirectional overrides and invalid UTF-8 appear escaped; the
// message and keys have such characters escaped in place. No caller can
// forget it. A value is cut at MaxValueBytes and a message at
// MaxMessageBytes, so no user's text can flood the log.
package logging

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// MaxValueBytes and MaxMessageBytes bound a value and a message before
// escaping; what is cut is counted in the line.
const (
	MaxValueBytes   = 1024
	MaxMessageBytes = 4096
)

// Sink receives one formatted line per log record.
type Sink interface {
	Write(level slog.Level, line string)
}

// Handler is a slog.Handler writing to a Sink.
type Handler struct {
	sink  Sink
	level *slog.LevelVar
	attrs string // pre-formatted attributes from WithAttrs
	group string
	mu    *sync.Mutex
}

var _ slog.Handler = (*Handler)(nil)

// New returns a handler that drops records below level.
func New(sink Sink, level *slog.LevelVar) *Handler {
	return &Handler{sink: sink, level: level, mu: &sync.Mutex{}}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

// Handle implements slog.Handler.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.Grow(len("lachesis: ") + len(r.Message) + len(h.attrs) + 32*r.NumAttrs())
	b.WriteString("lachesis: ")
	writeEscaped(&b, clip(r.Message, MaxMessageBytes), false)
	b.WriteString(h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		writeAttr(&b, h.group, a)
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sink.Write(r.Level, b.String())
	return nil
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(h.attrs)
	for _, a := range as {
		writeAttr(&b, h.group, a)
	}
	h2 := *h
	h2.attrs = b.String()
	return &h2
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	h2 := *h
	h2.group = h.group + name + "."
	return &h2
}

func writeAttr(b *strings.Builder, group string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, ga := range v.Group() {
			writeAttr(b, group+a.Key+".", ga)
		}
		return
	}
	b.WriteByte(' ')
	writeEscaped(b, group+a.Key, true)
	b.WriteByte('=')
	s := clip(v.String(), MaxValueBytes)
	if needsQuoting(s) {
		b.WriteString(strconv.Quote(s))
	} else {
		b.WriteString(s)
	}
}

// needsQuoting says s is not a bare value: empty, or holding a rune that
// separates or quotes values (space, '"', '=', '\'), one that is not
// printable (control and format characters, line and paragraph
// separators, tabs), or invalid UTF-8.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// writeEscaped writes s with every rune that is not printable escaped as
// Go writes it in a quoted string (\n, \x1b, \u202e; invalid UTF-8 as
// \xff), so that a message stays one line of text. A key also has its
// spaces, '=' and '"' replaced by '_', so the line still reads as
// key=value pairs.
func writeEscaped(b *strings.Builder, s string, key bool) {
	for i := 0; i < len(s); {
		if c := s[i]; c >= ' ' && c < 0x7f && (!key || (c != ' ' && c != '=' && c != '"')) {
			// Printable ASCII: as it is, up to the next byte that is not.
			j := i + 1
			for j < len(s) && s[j] >= ' ' && s[j] < 0x7f && (!key || (s[j] != ' ' && s[j] != '=' && s[j] != '"')) {
				j++
			}
			b.WriteString(s[i:j])
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(b, `\x%02x`, s[i])
		case key && (r == ' ' || r == '=' || r == '"'):
			b.WriteByte('_')
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
}

// clip cuts s to at most max bytes on a rune boundary, saying how many
// bytes it left out.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…(" + strconv.Itoa(len(s)-n) + " more bytes)"
}

// ParseLevel maps a config log_level to a slog level.
func ParseLevel(s string) slog.Level {
	switch s {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}
