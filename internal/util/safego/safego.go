// Package safego runs the long-lived goroutines Lachesis starts inside
// slurmctld. In a c-shared library an unrecovered panic in any goroutine
// kills the whole process, and that process is slurmctld: a bug in a
// Lachesis goroutine must cost at most that goroutine's work, never the
// controller.
package safego

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
)

// RestartPause is how long a loop waits after a panic before it starts
// again, so a panic on every iteration cannot spin a CPU.
var RestartPause = time.Second

// Loop runs fn in a new goroutine. If fn panics, the panic is logged and fn
// is started again after RestartPause; when fn returns normally, done (if
// not nil) is called and the goroutine ends.
func Loop(log *slog.Logger, name string, fn func(), done func()) {
	go func() {
		for !runOnce(log, name, fn) {
			time.Sleep(RestartPause)
		}
		if done != nil {
			done()
		}
	}()
}

// runOnce reports whether fn returned normally.
func runOnce(log *slog.Logger, name string, fn func()) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("recovered from panic; restarting", "goroutine", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			ok = false
		}
	}()
	fn()
	return true
}
