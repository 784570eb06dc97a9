package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// historyDB is a real ledger file holding rows of model_job_use.
func historyDB(t *testing.T, rows ...ledger.ModelJobUse) string {
	return ledgerFile(t, func(s *ledger.SQLite) error { return s.SaveModelJobUse(rows) })
}

// withConfig points the profiler at a lachesis.yaml holding yaml.
func withConfig(t *testing.T, yaml string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lachesis.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_CONF", filepath.Join(dir, "slurm.conf"))
	t.Setenv("LACHESIS_CONFIG", "")
}

// line is the output line of user's history of model ("" when absent).
func line(out, user, model string) string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == user && f[1] == model {
			return l
		}
	}
	return ""
}

// Each user's history of each model, folded as the controller folds it
// (peaks over the kept jobs), with what it says of the next one-GPU job
// under the site's sharing.convert_* rule; the newest history first, and
// --limit bounds the rows.
func TestHistoryShowsEachUsersModelsAndTheNextJobsFate(t *testing.T) {
	db := historyDB(t,
		ledger.ModelJobUse{User: 0, Model: "bert", JobID: 1, UtilPeak: 20, MemPeakMB: 2048, Samples: 5, Finished: 1000},
		ledger.ModelJobUse{User: 0, Model: "bert", JobID: 2, UtilPeak: 35, MemPeakMB: 4096, Samples: 5, Finished: 1100},
		ledger.ModelJobUse{User: 0, Model: "bert", JobID: 3, UtilPeak: 10, MemPeakMB: 1024, Samples: 5, Finished: 1200},
		ledger.ModelJobUse{User: 4242424, Model: "bert", JobID: 4, UtilPeak: 90, MemPeakMB: 1024, Samples: 5, Finished: 1300},
		ledger.ModelJobUse{User: 4242424, Model: "bert", JobID: 5, UtilPeak: 5, MemPeakMB: 1024, Samples: 5, Finished: 1310},
		ledger.ModelJobUse{User: 4242424, Model: "bert", JobID: 6, UtilPeak: 5, MemPeakMB: 1024, Samples: 5, Finished: 1320},
		ledger.ModelJobUse{User: 0, Model: "gnmt", JobID: 7, UtilPeak: 5, MemPeakMB: 1024, Samples: 5, Finished: 1400},
		ledger.ModelJobUse{User: 0, Model: "llm", JobID: 8, UtilPeak: 5, MemPeakMB: 40000, Samples: 5, Finished: 900},
		ledger.ModelJobUse{User: 0, Model: "llm", JobID: 9, UtilPeak: 5, MemPeakMB: 1000, Samples: 5, Finished: 901},
		ledger.ModelJobUse{User: 0, Model: "llm", JobID: 10, UtilPeak: 5, MemPeakMB: 1000, Samples: 5, Finished: 902})
	withConfig(t, "db_path: "+db+"\nsharing:\n  opportunistic_partition: opp\n  convert_below_pct: 50\n  convert_min_jobs: 3\n")
	out, _, err := runCLI(t, "history")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ user, model, want string }{
		{"root", "bert", " 3 35 4.0 "},
		{"root", "bert", "shards"},
		{"4242424", "bert", "whole: peak util 90% >= 50%"},
		{"root", "gnmt", "whole: 1 of 3 jobs measured"},
		{"root", "llm", "whole: peak mem 40000 MB >= 16384 MB"},
	} {
		if l := strings.Join(strings.Fields(line(out, c.user, c.model)), " "); !strings.Contains(l, c.want) {
			t.Errorf("%s's %s: line %q, want %q in it:\n%s", c.user, c.model, l, c.want, out)
		}
	}
	if !strings.Contains(out, "rule: convert_below_pct 50, convert_mem_below_mb 16384, convert_min_jobs 3 (from ") {
		t.Errorf("output does not say which rule it applied:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[2], "root ") || !strings.Contains(lines[2], "gnmt") {
		t.Fatalf("want the rule, the header and 4 histories, gnmt's (the newest) first:\n%s", out)
	}
	out, _, err = runCLI(t, "history", "--limit", "1")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, "gnmt") {
		t.Fatalf("--limit 1: %v\n%s", err, out)
	}
}

// Without a lachesis.yaml the rule's defaults are shown, and said to be
// the defaults (convert off); an empty ledger says it has no history.
func TestHistoryLabelsTheDefaultsAndReadsAnEmptyLedger(t *testing.T) {
	db := historyDB(t, ledger.ModelJobUse{User: 0, Model: "bert", JobID: 1, UtilPeak: 20, MemPeakMB: 2048, Samples: 5, Finished: 1000})
	t.Setenv("SLURM_CONF", filepath.Join(t.TempDir(), "slurm.conf"))
	t.Setenv("LACHESIS_CONFIG", "")
	out, _, err := runCLI(t, "history", "--db", db)
	if err != nil || !strings.Contains(out, "(defaults: no ") || !strings.Contains(line(out, "root", "bert"), "whole (convert_below_pct is 0: off)") {
		t.Fatalf("%v\n%s", err, out)
	}
	empty := filepath.Join(t.TempDir(), "old.db")
	s, err := ledger.Open(empty)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, _, err = runCLI(t, "history", "--db", empty)
	if err != nil || !strings.Contains(out, "no user's history yet") {
		t.Fatalf("empty ledger: %v\n%s", err, out)
	}
}

// Hostile: a model key is the user's own text. Control characters do not
// reach the admin's terminal and a long key is cut.
func TestHistoryPrintsAHostileModelKeyHarmlessly(t *testing.T) {
	key := "evil\x1b]0;owned\x07" + strings.Repeat("m", 500)
	db := historyDB(t, ledger.ModelJobUse{User: 0, Model: key, JobID: 1, UtilPeak: 20, MemPeakMB: 2048, Samples: 5, Finished: 1000})
	t.Setenv("SLURM_CONF", filepath.Join(t.TempDir(), "slurm.conf"))
	out, _, err := runCLI(t, "history", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, strings.Repeat("m", maxHistoryModel+1)) {
		t.Fatalf("hostile key printed raw or uncut:\n%q", out)
	}
}
