package logging

import (
	"log/slog"
	"strings"
	"testing"
)

type lines struct{ got []string }

func (l *lines) Write(_ slog.Level, line string) { l.got = append(l.got, line) }

func TestHandlerFormatsOneLineWithKeysAndDropsBelowLevel(t *testing.T) {
	sink := &lines{}
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelInfo)
	log := slog.New(New(sink, lv)).With("plugin", "x")
	log.Debug("hidden")
	log.Info("job changed queue", "job_id", 7, "reason", "two words")
	if len(sink.got) != 1 {
		t.Fatalf("got %d lines %q; want the debug line dropped", len(sink.got), sink.got)
	}
	want := `lachesis: job changed queue plugin=x job_id=7 reason="two words"`
	if sink.got[0] != want {
		t.Fatalf("line %q, want %q", sink.got[0], want)
	}
	lv.Set(slog.LevelDebug)
	log.WithGroup("g").Debug("now shown", "k", "v")
	if !strings.HasSuffix(sink.got[1], "g.k=v") {
		t.Fatalf("grouped line %q", sink.got[1])
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError, "": slog.LevelInfo} {
		if got := ParseLevel(in); got != want {
			t.Errorf("ParseLevel(%q) = %v, want %v", in, got, want)
		}
	}
}
