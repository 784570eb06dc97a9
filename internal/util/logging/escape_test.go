package logging

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func newLog() (*slog.Logger, *lines) {
	sink := &lines{}
	lv := new(slog.LevelVar)
	return slog.New(New(sink, lv)), sink
}

// Issue 34.8: a value used to be quoted only when it held a space, tab,
// '"' or '='; a job name or model key with a newline, a carriage return or
// an escape sequence reached slurmctld's log raw.
func TestValuesWithUserTextAreQuotedAndEscaped(t *testing.T) {
	for _, tc := range []struct{ name, value, want string }{
		{"a plain value stays bare", "bert-large", `bert-large`},
		{"printable non-ASCII stays bare", "résumé模型", `résumé模型`},
		{"a newline cannot start a forged line", "x\nlachesis:forged", `"x\nlachesis:forged"`},
		{"a carriage return cannot overwrite the line", "y\rlachesis:forged", `"y\rlachesis:forged"`},
		{"escape sequences are shown, not run", "\x1b[2K\x1b]0;owned\x07", `"\x1b[2K\x1b]0;owned\a"`},
		{"C1 controls and bidirectional overrides are shown", "a\u0085b\u202ec\u2028", `"a\u0085b\u202ec\u2028"`},
		{"invalid UTF-8 is shown as bytes", "bad\xff", `"bad\xff"`},
		{"a backslash is quoted, so a quoted value reads back whole", `a\nb`, `"a\\nb"`},
		{"a space, quote or '=' is quoted as before", `k=v "x"`, `"k=v \"x\""`},
		{"an empty value is quoted", "", `""`},
		{"a tab is escaped", "a\tb", `"a\tb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, sink := newLog()
			log.Info("m", "model", tc.value)
			if want := "lachesis: m model=" + tc.want; len(sink.got) != 1 || sink.got[0] != want {
				t.Fatalf("lines %q, want %q", sink.got, want)
			}
		})
	}
}

func TestMessagesAndKeysWithUserTextAreEscapedInPlace(t *testing.T) {
	log, sink := newLog()
	log.Info("job 7 kept off node n1: beside job 9 (model x\nlachesis: forged\x1b[2K\u202e)", "bad key=\n", 1)
	want := `lachesis: job 7 kept off node n1: beside job 9 (model x\nlachesis: forged\x1b[2K\u202e) bad_key_\n=1`
	if len(sink.got) != 1 || sink.got[0] != want {
		t.Fatalf("lines %q, want %q", sink.got, want)
	}
	log.With("model", "a\nb").WithGroup("g\r").Info("m", "k", "v")
	if want := `lachesis: m model="a\nb" g\r.k=v`; sink.got[1] != want {
		t.Fatalf("line %q, want %q", sink.got[1], want)
	}
}

func TestLongValuesAndMessagesAreCut(t *testing.T) {
	log, sink := newLog()
	long := strings.Repeat("é", MaxValueBytes) // 2 bytes each: cut inside a rune
	log.Info(strings.Repeat("m", MaxMessageBytes+10), "model", long)
	line := sink.got[0]
	if !strings.Contains(line, "m…(10 more bytes) model=") {
		t.Fatalf("message not cut with its count: %q", line[len(line)-MaxValueBytes-60:])
	}
	if !strings.HasSuffix(line, "é…("+strconv.Itoa(MaxValueBytes)+` more bytes)"`) || !utf8.ValidString(line) {
		t.Fatalf("value not cut on a rune with its count: %q", line[len(line)-40:])
	}
	if len(line) > MaxMessageBytes+MaxValueBytes+100 {
		t.Fatalf("line of %d bytes", len(line))
	}
}

// FuzzLogLineIsOneLineOfPrintableText: whatever the message, key and value,
// the handler writes exactly one line, of valid UTF-8 in which every rune
// is printable (a space is the only blank): no newline, carriage return,
// control, format character or separator from the input survives raw. A
// value that was not cut reads back whole.
func FuzzLogLineIsOneLineOfPrintableText(f *testing.F) {
	for _, s := range []string{"", "plain", "x\nlachesis: forged job_id=1", "y\rz", "\x1b[2K\x1b]0;t\x07", "\u202e\u2028\u0085",
		"bad\xff\xfe", `a\"b=c d`, "\t", "é"} {
		f.Add(s, "model", s)
		f.Add("job refused "+s, s, "v")
	}
	f.Fuzz(func(t *testing.T, msg, key, value string) {
		log, sink := newLog()
		log.Info(msg, key, value)
		log.With(key, value).Info(msg)
		log.Info("m", "k", value)
		if len(sink.got) != 3 {
			t.Fatalf("%d lines for 3 records", len(sink.got))
		}
		for _, line := range sink.got {
			if !strings.HasPrefix(line, "lachesis: ") || !utf8.ValidString(line) {
				t.Fatalf("line %q", line)
			}
			for _, r := range line {
				if r != ' ' && !unicode.IsPrint(r) {
					t.Fatalf("line %q holds %U", line, r)
				}
			}
		}
		if len(value) > MaxValueBytes {
			return
		}
		got := strings.TrimPrefix(sink.got[2], "lachesis: m k=")
		if strings.HasPrefix(got, `"`) {
			var err error
			if got, err = strconv.Unquote(got); err != nil {
				t.Fatalf("value %q does not unquote: %v", sink.got[2], err)
			}
		}
		if got != value {
			t.Fatalf("value %q reads back as %q", value, got)
		}
	})
}

// BenchmarkHandleALine formats a typical pass line (a message and five
// attributes, one of them a user's model key) into a sink that keeps
// nothing: the cost of checking every rune of the message and the values.
func BenchmarkHandleALine(b *testing.B) {
	lv := new(slog.LevelVar)
	log := slog.New(New(discard{}, lv))
	b.ReportAllocs()
	for b.Loop() {
		log.Info("effective service: run weighted by its GPU type's speed", "job_id", 12345,
			"gpu_type", "a100", "model", "bert-large-uncased", "speed", 1.5, "source", "profile")
	}
}

type discard struct{}

func (discard) Write(slog.Level, string) {}
