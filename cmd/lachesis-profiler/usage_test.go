package main

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
)

// usageDB is a real ledger file holding rows of job_gpu_use.
func usageDB(t *testing.T, rows ...ledger.JobGPUUse) string {
	return ledgerFile(t, func(s *ledger.SQLite) error { return s.SaveJobGPUUse(rows) })
}

// ledgerFile is a real ledger file in a test's temporary directory, with
// what save writes into it.
func ledgerFile(t *testing.T, save func(*ledger.SQLite) error) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lachesis.db")
	s, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := save(s); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSlurmFigures makes the jobs command's sacct answer figs and err for
// the test.
func noSlurmFigures(t *testing.T, figs map[uint32]slurmcmd.JobGPUFigures, err error) {
	old := slurmGPUFigures
	slurmGPUFigures = func([]uint32) (map[uint32]slurmcmd.JobGPUFigures, error) { return figs, err }
	t.Cleanup(func() { slurmGPUFigures = old })
}

func TestJobsListsEachJobsGPUUse(t *testing.T) {
	noSlurmFigures(t, nil, nil)
	now := time.Now().Unix()
	db := usageDB(t,
		ledger.JobGPUUse{JobID: 41, User: 0, Samples: 4, UtilSum: 148, UtilPeak: 80, MemPeakMB: 9318, GPUsMax: 2, SharersMax: 1,
			ProgressSamples: 2, ItersPerSecSum: 25, ItersPerSecLast: 12.5, FirstSeen: now - 100, LastSeen: now - 10},
		ledger.JobGPUUse{JobID: 42, User: 4242424, Samples: 1, UtilSum: 3, UtilPeak: 3, FirstSeen: now - 50, LastSeen: now - 5, Finished: now})
	out, _, err := runCLI(t, "jobs", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "42 ") || !strings.HasPrefix(lines[2], "41 ") || !strings.HasPrefix(lines[3], "note: n/a (not reported by Slurm)") {
		t.Fatalf("want the header, jobs 42, 41 (most recent first) and the note on Slurm's figures:\n%s", out)
	}
	for _, want := range []string{"root", "running", "37", "80", "9.1", "12.5", "4242424", "ended"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runCLI(t, "jobs", "--db", db, "--limit", "1")
	if err != nil || strings.Count(out, "\n") != 3 {
		t.Fatalf("--limit 1: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "jobs", "--db", db, "--slurm=false")
	if err != nil || strings.Count(out, "\n") != 3 || strings.Contains(out, "SLURM") {
		t.Fatalf("--slurm=false: %v\n%s", err, out)
	}
}

// Slurm's own figures (sacct's gres/gpuutil and gres/gpumem) stand beside
// the agents' where Slurm has them, n/a where it has none; when sacct
// fails the table still comes, with the reason.
func TestJobsShowsSlurmsGPUFiguresBesideTheAgents(t *testing.T) {
	now := time.Now().Unix()
	db := usageDB(t,
		ledger.JobGPUUse{JobID: 41, Samples: 4, UtilSum: 148, UtilPeak: 80, MemPeakMB: 9318, GPUsMax: 1, FirstSeen: now - 100, LastSeen: now - 10},
		ledger.JobGPUUse{JobID: 42, Samples: 1, UtilSum: 3, UtilPeak: 3, FirstSeen: now - 50, LastSeen: now - 5})
	noSlurmFigures(t, map[uint32]slurmcmd.JobGPUFigures{
		41: {UtilPct: 36, MemBytes: 9.5 * (1 << 30)},
		42: {UtilPct: math.NaN(), MemBytes: math.NaN()},
	}, nil)
	out, _, err := runCLI(t, "jobs", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[0], "SLURM UTIL %  SLURM PEAK MEM GiB") {
		t.Fatalf("want Slurm's two columns last:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "42" || f[len(f)-1] != "n/a" || f[len(f)-2] != "n/a" {
		t.Errorf("job 42, which Slurm did not measure: %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[0] != "41" || f[len(f)-1] != "9.5" || f[len(f)-2] != "36" {
		t.Errorf("job 41: %q, want Slurm's 36%% and 9.5 GiB last", lines[2])
	}
	if !strings.Contains(lines[3], "agree") {
		t.Errorf("the note does not say what to compare: %q", lines[3])
	}

	noSlurmFigures(t, nil, errors.New("sacct: Slurm accounting storage is disabled"))
	out, _, err = runCLI(t, "jobs", "--db", db)
	if err != nil || !strings.Contains(out, "could not be read (sacct: Slurm accounting storage is disabled)") || !strings.Contains(out, "\n41 ") {
		t.Fatalf("sacct failing: %v\n%s", err, out)
	}
}

func TestIdleListsRunningJobsBelowTheThresholdForLongEnough(t *testing.T) {
	now := time.Now().Unix()
	db := usageDB(t,
		// idle at 10% for an hour, peak 4% since
		ledger.JobGPUUse{JobID: 1, Samples: 9, UtilSum: 30, IdleBelowPct: 10, IdleSince: now - 3600, IdlePeak: 4, LastSeen: now},
		// idle for 10 minutes only
		ledger.JobGPUUse{JobID: 2, Samples: 9, UtilSum: 30, IdleBelowPct: 10, IdleSince: now - 600, IdlePeak: 4, LastSeen: now},
		// busy
		ledger.JobGPUUse{JobID: 3, Samples: 9, UtilSum: 600, IdleBelowPct: 10, LastSeen: now},
		// idle, but ended
		ledger.JobGPUUse{JobID: 4, Samples: 9, UtilSum: 30, IdleBelowPct: 10, IdleSince: now - 3600, LastSeen: now, Finished: now})
	listed := func(out string) []string {
		var ids []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 && f[0] != "note:" && f[0] != "no" {
				ids = append(ids, f[0])
			}
		}
		return ids
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--below", "10", "--for", "30m"}, "1"},
		{[]string{"--below", "10", "--for", "5m"}, "1 2"},
		{[]string{"--below", "3", "--for", "5m"}, ""}, // both reached 4% while idle
		{[]string{"--below", "5", "--for", "5m"}, "1 2"},
		{[]string{"--below", "10", "--for", "2h"}, ""},
	} {
		out, _, err := runCLI(t, append([]string{"idle", "--db", db}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(listed(out), " "); got != tc.want {
			t.Fatalf("idle %v listed %q, want %q:\n%s", tc.args, got, tc.want, out)
		}
	}
}

// The idle rule's defaults come from lachesis.yaml next to slurm.conf.
func TestIdleDefaultsComeFromLachesisYAML(t *testing.T) {
	now := time.Now().Unix()
	db := usageDB(t, ledger.JobGPUUse{JobID: 1, Samples: 9, UtilSum: 30, IdleBelowPct: 10, IdleSince: now - 900, IdlePeak: 4, LastSeen: now})
	dir := t.TempDir()
	writeConf := func(after int) {
		t.Helper()
		yaml := "db_path: " + db + "\nusage:\n  idle_below_pct: 10\n  idle_after: " + strconv.Itoa(after) + "\n"
		if err := os.WriteFile(filepath.Join(dir, "lachesis.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SLURM_CONF", filepath.Join(dir, "slurm.conf"))
	t.Setenv("LACHESIS_CONFIG", "")
	writeConf(600)
	if out, _, err := runCLI(t, "idle"); err != nil || !strings.Contains(out, "\n1 ") {
		t.Fatalf("idle_after 600: %v\n%s", err, out)
	}
	writeConf(1800)
	if out, _, err := runCLI(t, "idle"); err != nil || strings.Contains(out, "\n1 ") {
		t.Fatalf("idle_after 1800: %v\n%s", err, out)
	}
}
