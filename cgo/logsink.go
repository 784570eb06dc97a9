//go:build cgo

package main

/*
#include <stdlib.h>
#include "lachesis_core.h"

// cgo cannot call a C function pointer directly.
static inline void lachesis_call_log(lachesis_log_fn fn, int level, const char *msg) {
	if (fn) fn(level, msg);
}
*/
import "C"

import (
	"log/slog"
	"unsafe"
)

// cLogSink writes log lines through the plugin's callback into slurmctld's
// own log, so admins find Lachesis's messages where they look for Slurm's.
type cLogSink struct{ fn C.lachesis_log_fn }

func (s cLogSink) Write(level slog.Level, line string) {
	msg := C.CString(line)
	defer C.free(unsafe.Pointer(msg))
	lv := C.int(C.LACHESIS_LOG_INFO)
	switch {
	case level >= slog.LevelError:
		lv = C.LACHESIS_LOG_ERROR
	case level >= slog.LevelWarn:
		lv = C.LACHESIS_LOG_WARN
	case level < slog.LevelInfo:
		lv = C.LACHESIS_LOG_DEBUG
	}
	C.lachesis_call_log(s.fn, lv, msg)
}
