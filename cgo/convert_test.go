//go:build cgo

package main

import (
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
)

// The plugin replaces or clears only a state_desc that starts with the
// header's prefix, so the core's reasons must start with the same text.
func TestReasonPrefixMatchesTheHeader(t *testing.T) {
	if got := reasonPrefixC(); got != reasontext.WaitingPrefix {
		t.Fatalf("LACHESIS_REASON_PREFIX %q, reasontext.WaitingPrefix %q", got, reasontext.WaitingPrefix)
	}
}

// The plugin replaces only the AdminComment segment that starts with the
// header's prefix; the core's segment must start with the same text, and
// fit the struct's buffer whole.
func TestUsagePrefixMatchesTheHeader(t *testing.T) {
	if got := usagePrefixC(); got != gpushare.UsagePrefix {
		t.Fatalf("LACHESIS_USAGE_PREFIX %q, gpushare.UsagePrefix %q", got, gpushare.UsagePrefix)
	}
	if n := usageBufC(); gpushare.UsageMax >= n {
		t.Fatalf("gpushare.UsageMax %d does not fit lachesis_prio_t.usage[%d]", gpushare.UsageMax, n)
	}
}
