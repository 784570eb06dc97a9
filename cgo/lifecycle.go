//go:build cgo

package main

import (
	"errors"
	"log/slog"
	"sync"

	"github.com/lachesis-sched/lachesis/internal/controller/core"
	"github.com/lachesis-sched/lachesis/internal/util/logging"
)

// One core per process, shared by every Lachesis plugin that slurmctld
// loads; each plugin's init()/fini() adds/drops a reference.
var (
	lifeMu   sync.Mutex
	theHost  *host
	refs     int
	logLevel = new(slog.LevelVar)
	theLog   = slog.New(slog.DiscardHandler)
)

func logger() *slog.Logger {
	lifeMu.Lock()
	defer lifeMu.Unlock()
	return theLog
}

func running() *host {
	lifeMu.Lock()
	defer lifeMu.Unlock()
	return theHost
}

// errABI: a plugin built against another version of lachesis_core.h.
var errABI = errors.New("the plugin and liblachesis_core.so were built from different versions (ABI mismatch); rebuild both")

func start(env core.Env, sink logging.Sink) error {
	lifeMu.Lock()
	defer lifeMu.Unlock()
	if theHost != nil {
		refs++
		return nil
	}
	theLog = slog.New(logging.New(sink, logLevel))
	c, err := core.Open(env, theLog)
	if err != nil {
		return err
	}
	logLevel.Set(logging.ParseLevel(c.Config().LogLevel))
	theHost, refs = newHost(c), 1
	return nil
}

func stop() {
	lifeMu.Lock()
	defer lifeMu.Unlock()
	if theHost == nil {
		return
	}
	if refs--; refs > 0 {
		return
	}
	if err := theHost.core.Close(); err != nil {
		theLog.Error("closing the ledger", "err", err)
	}
	theHost = nil
}

func applyLogLevel(c *core.Core) { logLevel.Set(logging.ParseLevel(c.Config().LogLevel)) }
