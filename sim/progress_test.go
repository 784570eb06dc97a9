package sim

import (
	"bytes"
	"strings"
	"testing"
)

func TestBar_DrawsProgressAndEndsTheLine(t *testing.T) {
	var buf bytes.Buffer
	b := NewBar(&buf, "simulating", 200)
	b.Add(100)
	b.Add(100)
	b.Finish()
	out := buf.String()
	if !strings.Contains(out, " 50% 100/200 jobs") || !strings.Contains(out, "100% 200/200 jobs") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("bar output %q", out)
	}
}
