package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every C entry point lives in exports.go, so that file is the whole list
// of what the plugins may call (README, lachesis_core.h).
func TestEveryExportIsInExportsGo(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	inExports := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "//export ") {
				continue
			}
			if f != "exports.go" {
				t.Errorf("%s: %s: C entry points belong in exports.go", f, line)
			} else {
				inExports++
			}
		}
	}
	if inExports == 0 {
		t.Fatal("no //export found in exports.go")
	}
}
