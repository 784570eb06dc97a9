package procjob

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const statusText = `Name:	python3
Umask:	0022
State:	S (sleeping)
Tgid:	4242
Pid:	4242
PPid:	4200
Uid:	1001	1001	1001	1001
Gid:	1001	1001	1001	1001
VmPeak:	  20000 kB
VmHWM:	   5120 kB
VmRSS:	   4096 kB
`

func TestParseStatus(t *testing.T) {
	st, err := ParseStatus([]byte(statusText))
	if err != nil || st != (Status{UID: 1001, PPID: 4200, VmHWMKB: 5120}) {
		t.Fatalf("got %+v, %v", st, err)
	}
	for _, tc := range []struct {
		name, uids string
		root       bool
	}{
		{"root in every uid", "0\t0\t0\t0", true},
		{"a setuid-root program run by a user", "1001\t0\t0\t0", false},
		{"root dropping to a user", "0\t1001\t0\t0", false},
		{"three uids", "0\t0\t0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := ParseStatus([]byte("PPid:\t1\nUid:\t" + tc.uids + "\n"))
			if err != nil || st.AllRoot != tc.root {
				t.Fatalf("got %+v, %v", st, err)
			}
		})
	}
}

func TestParseStatusSaysAZombieHasExited(t *testing.T) {
	for state, exited := range map[string]bool{"S (sleeping)\nThreads:\t1": false, "R (running)": false,
		"D (disk sleep)": false, "Z (zombie)\nThreads:\t1": true, "X (dead)": true,
		// Its main thread exited (pthread_exit), another runs.
		"Z (zombie)\nThreads:\t2": false} {
		st, err := ParseStatus([]byte("State:\t" + state + "\nPPid:\t1\nUid:\t1001\t1001\t1001\t1001\n"))
		if err != nil || st.Exited != exited {
			t.Errorf("State %s: got %+v, %v, want exited %v", state, st, err, exited)
		}
	}
}

func TestParseStatusRefusesAStatusWithoutItsFields(t *testing.T) {
	for name, text := range map[string]string{
		"no Uid":        "PPid:\t1\n",
		"no PPid":       "Uid:\t0\t0\t0\t0\n",
		"empty Uid":     "PPid:\t1\nUid:\n",
		"a Uid word":    "PPid:\t1\nUid:\troot\n",
		"a PPid word":   "PPid:\tx\nUid:\t0\n",
		"empty":         "",
		"binary":        "\x00\xff\x1b[2J",
		"uid too large": "PPid:\t1\nUid:\t4294967296\n",
	} {
		if _, err := ParseStatus([]byte(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseStatReadsPastAHostileCommandName(t *testing.T) {
	// A process may name itself with spaces and parentheses.
	text := "4242 (a) b (c) d) S 4200 4242 4242 0 -1 4194560 100 0 0 0 37 5 0 0 20 0 1 0 100 1000 100\n"
	st, err := ParseStat([]byte(text))
	if err != nil || st != (Stat{PPID: 4200, UTime: 37, STime: 5, StartTime: 100}) {
		t.Fatalf("got %+v, %v", st, err)
	}
	for _, text := range []string{"", "4242 python S 1 2", "4242 (x) S 1 2 3"} {
		if _, err := ParseStat([]byte(text)); err == nil {
			t.Errorf("%q accepted", text)
		}
	}
}

func TestReadBoundedRefusesOrCutsWhatIsOverTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readBounded(path, 99, false); !errors.Is(err, errTooLarge) {
		t.Fatalf("got %v, want errTooLarge", err)
	}
	if b, err := readBounded(path, 10, true); err != nil || len(b) != 10 {
		t.Fatalf("cut: got %d bytes, %v", len(b), err)
	}
	if b, err := readBounded(path, 100, false); err != nil || len(b) != 100 {
		t.Fatalf("at the bound: got %d bytes, %v", len(b), err)
	}
}

func TestOwnerIsTheRealUIDOfALiveProcess(t *testing.T) {
	if uid, ok := Owner(os.Getpid()); !ok || uid != uint32(os.Getuid()) {
		t.Fatalf("got %d, %v", uid, ok)
	}
	if _, ok := Owner(1 << 30); ok {
		t.Fatal("a pid that does not exist has an owner")
	}
}

func TestReadStatOfThisProcess(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil || st.PPID != os.Getppid() {
		t.Fatalf("got %+v, %v; want parent %d", st, err, os.Getppid())
	}
}
