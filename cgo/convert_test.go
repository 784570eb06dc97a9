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

// The plugin replaces only the AdminComment segment that starts with the
// header's prefix; the core's segment must start with the same text, and
// fit the struct's buffer whole.
func TestUsagePrefixMatchesTheHeader(t *testing.T) {
	if got := usagePrefixC(); got != core.UsagePrefix {
		t.Fatalf("LACHESIS_USAGE_PREFIX %q, core.UsagePrefix %q", got, core.UsagePrefix)
	}
	if n := usageBufC(); core.UsageMax >= n {
		t.Fatalf("core.UsageMax %d does not fit lachesis_prio_t.usage[%d]", core.UsageMax, n)
	}
}
