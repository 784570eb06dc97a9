//go:build cgo

package main

import (
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/core"
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
	if got := usagePrefixC(); got != gpushare.GPUUsePrefix {
		t.Fatalf("LACHESIS_USAGE_PREFIX %q, gpushare.GPUUsePrefix %q", got, gpushare.GPUUsePrefix)
	}
	if n := usageBufC(); gpushare.GPUUseMax >= n {
		t.Fatalf("gpushare.GPUUseMax %d does not fit lachesis_prio_t.usage[%d]", gpushare.GPUUseMax, n)
	}
}

// The same for the quota segment (core/quotaplace.go).
func TestQuotaPrefixMatchesTheHeader(t *testing.T) {
	if got := quotaPrefixC(); got != core.QuotaSegmentPrefix {
		t.Fatalf("LACHESIS_QUOTA_PREFIX %q, core.QuotaSegmentPrefix %q", got, core.QuotaSegmentPrefix)
	}
	if n := quotaBufC(); core.QuotaSegmentMax >= n {
		t.Fatalf("core.QuotaSegmentMax %d does not fit lachesis_prio_t.quota[%d]", core.QuotaSegmentMax, n)
	}
}
