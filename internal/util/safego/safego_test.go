package safego

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

func TestLoopRestartsAfterAPanicAndCallsDoneOnReturn(t *testing.T) {
	RestartPause = time.Millisecond
	var runs atomic.Int32
	done := make(chan struct{})
	Loop(slog.New(slog.NewTextHandler(io.Discard, nil)), "test", func() {
		if runs.Add(1) < 3 {
			panic("boom")
		}
	}, func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("done never called")
	}
	if got := runs.Load(); got != 3 {
		t.Fatalf("fn ran %d times, want 3 (two panics, then a normal return)", got)
	}
}
