package procjob

import "testing"

func TestStepdJobID(t *testing.T) {
	for title, want := range map[string]uint32{
		"slurmstepd: [1234.0]\x00\x00":     1234,
		"slurmstepd: [7.batch]":            7,
		"slurmstepd: [9.extern]\x00      ": 9,
		"slurmstepd: [.0]":                 0,
		"slurmstepd: [x.0]":                0,
		"slurmstepd:[5.0]":                 0,
		"/usr/sbin/slurmstepd":             0,
		"python train.py":                  0,
		"slurmstepd: [99999999999.0]":      0,
	} {
		if got := stepdJobID(title); got != want {
			t.Errorf("stepdJobID(%q) = %d, want %d", title, got, want)
		}
	}
}
