//go:build cgo

package main

import (
	"bytes"
	"testing"
	"unsafe"
)

// Issue 34.8: the plugins print the core's reasons and errors into
// slurmctld's log with info() and debug(), and they quote what users chose
// (a model key, a gres string): none of it reaches C with a control or
// format character, and a cut never splits a rune.
func TestTextForThePluginsHasNoControlCharacters(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		size     int
		want     string
	}{
		{"a reason naming a hostile model keeps its marker",
			"sized from the profile of x\nlachesis: forged\r\x1b[2K\u202e\u0085 [lachesis:sized cpus=4 mem=8]", 128,
			"sized from the profile of xlachesis: forged[2K [lachesis:sized cpus=4 mem=8]"},
		{"invalid UTF-8 is dropped", "bad\xffgres", 16, "badgres"},
		{"a cut falls on a rune boundary", "ééé", 6, "éé"},
		{"plain text is copied as is", "gres:gpu:4", 16, "gres:gpu:4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Repeat([]byte{0xAA}, tc.size)
			copyCText(unsafe.Pointer(&b[0]), len(b), tc.in)
			end := bytes.IndexByte(b, 0)
			if end < 0 {
				t.Fatalf("not NUL-terminated: %q", b)
			}
			if got := string(b[:end]); got != tc.want {
				t.Fatalf("copied %q, want %q", got, tc.want)
			}
		})
	}
}
