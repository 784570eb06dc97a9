//go:build cgo

package main

import (
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/core"
)

// The plugin replaces or clears only a state_desc that starts with the
// header's prefix, so the core's reasons must start with the same text.
func TestReasonPrefixMatchesTheHeader(t *testing.T) {
	if got := reasonPrefixC(); got != core.ReasonPrefix {
		t.Fatalf("LACHESIS_REASON_PREFIX %q, core.ReasonPrefix %q", got, core.ReasonPrefix)
	}
}
