package agent

import (
	"errors"
	"os"
	"testing"
)

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

func TestParseOwner(t *testing.T) {
	if uid, err := parseOwner("1001\n", 5); err != nil || uid != 1001 {
		t.Fatalf("got %d, %v", uid, err)
	}
	if _, err := parseOwner("", 5); !errors.Is(err, ErrNoJob) {
		t.Fatalf("no job: got %v", err)
	}
	if _, err := parseOwner("1001\n1002\n", 5); err == nil {
		t.Fatal("two answers accepted")
	}
}

// The test process is in no Slurm step: a process that only calls itself
// slurmstepd (its own title) is not one.
func TestStepdOf_ATitleIsNotAStep(t *testing.T) {
	if id, pid := stepdOf(os.Getpid()); id != 0 || pid != 0 {
		t.Fatalf("the test process is in job %d (stepd %d)", id, pid)
	}
}
