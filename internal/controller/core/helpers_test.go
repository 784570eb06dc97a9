package core

import (
	"os"
	"testing"
	"unsafe"
)

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// unsafeData is the address of a string's bytes, to tell interned strings
// from equal copies.
func unsafeData(s string) *byte { return unsafe.StringData(s) }
