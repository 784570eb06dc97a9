// Package logging is a log/slog handler that hands each record, formatted
// as one "msg key=value ..." line, to a Sink. The plugins' sink writes into
// slurmctld's log; tests use a buffer.
package logging

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	b.WriteString("lachesis: ")
	b.WriteString(r.Message)
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
	s := v.String()
	if strings.ContainsAny(s, " \t\"=") || s == "" {
		s = fmt.Sprintf("%q", s)
	}
	fmt.Fprintf(b, " %s%s=%s", group, a.Key, s)
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
