package sharing

import (
	"errors"
	"math"
	"testing"
)

func TestGuestMemoryHeadroomIsValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		pct  float64
		ok   bool
	}{
		{"the default", DefaultGuestMemoryHeadroomPct, true},
		{"no headroom", 0, true},
		{"negative is refused", -1, false},
		{"NaN is refused", math.NaN(), false},
		{"infinity is refused", math.Inf(1), false},
		{"90% and above leaves a guest nothing: refused", MaxGuestMemoryHeadroomPct, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.GuestMemoryHeadroomPct = tc.pct
			err := c.Validate()
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrBadConfig)) {
				t.Fatalf("headroom %v: err = %v, want ok=%v", tc.pct, err, tc.ok)
			}
		})
	}
}

// An 80 GiB GPU (81920 MiB) with the default 10% headroom (8192 MiB).
func TestMemoryOverByOutcome(t *testing.T) {
	c := DefaultConfig()
	const total = 81920
	for _, tc := range []struct {
		name                   string
		total, hostPeak, guest float64
		room                   float64 // NaN: none can be told
		over                   bool
	}{
		{"a guest within what the host's peak leaves is kept", total, 60000, 13000, 13728, false},
		{"a guest exactly at the room is kept", total, 60000, 13728, 13728, false},
		{"a guest past the room goes", total, 60000, 13729, 13728, true},
		{"the host's peak grew to the guest's: the guest goes", total, 70000, 13000, 3728, true},
		{"a host that needs the whole GPU leaves no room", total, 80000, 1, 0, true},
		{"a guest that holds nothing never goes", total, 80000, 0, 0, false},
		{"a host not yet measured (0 MiB) leaves all but the headroom", total, 0, 73000, 73728, false},
		{"an unknown GPU total (an older agent) decides nothing", 0, 60000, 80000, math.NaN(), false},
		{"a NaN total decides nothing", math.NaN(), 60000, 80000, math.NaN(), false},
		{"an infinite total decides nothing", math.Inf(1), 60000, 80000, math.NaN(), false},
		{"a NaN host peak decides nothing", total, math.NaN(), 80000, math.NaN(), false},
		{"a negative host peak decides nothing", total, -1, 80000, math.NaN(), false},
		{"a NaN guest decides nothing", total, 60000, math.NaN(), 13728, false},
		{"an infinite guest decides nothing", total, 60000, math.Inf(1), 13728, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room := c.GuestMemoryRoom(tc.total, tc.hostPeak)
			if !(room == tc.room || math.IsNaN(room) && math.IsNaN(tc.room)) {
				t.Errorf("room %v MiB, want %v", room, tc.room)
			}
			if got := c.MemoryOver(tc.total, tc.hostPeak, tc.guest); got != tc.over {
				t.Errorf("MemoryOver(%v, %v, %v) = %v, want %v", tc.total, tc.hostPeak, tc.guest, got, tc.over)
			}
		})
	}
}

func TestMemoryHeadroomIsAShareOfTheGPU(t *testing.T) {
	c := Config{GuestMemoryHeadroomPct: 0}
	if r := c.GuestMemoryRoom(40960, 10240); r != 30720 {
		t.Fatalf("no headroom: room %v, want 30720", r)
	}
	c.GuestMemoryHeadroomPct = 25
	if r := c.GuestMemoryRoom(40960, 10240); r != 20480 {
		t.Fatalf("25%% headroom: room %v, want 20480", r)
	}
}
