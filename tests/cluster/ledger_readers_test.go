package cluster_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
)

// sqlite3 runs the sqlite3 command-line tool on the live database, as an
// admin would, read-write or with -readonly.
func (e *env) sqlite3(readonly bool, query string) string {
	e.t.Helper()
	args := []string{e.dbPath(), query}
	if readonly {
		args = append([]string{"-readonly"}, args...)
	}
	out, err := exec.Command("sqlite3", args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("sqlite3 %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Issue 26 item 1: reading the live database with the sqlite3 tool, both
// read-write (as the README once showed) and -readonly, loses nothing that
// slurmctld writes afterwards: slurmctld keeps its locks on the file, so
// the tool never thinks itself the last user and never checkpoints and
// deletes the WAL slurmctld is writing. Before the fix the profile store's
// open closed a descriptor of lachesis.db and dropped the ledger's locks:
// later job rows and model keys never reached the file, and after a clean
// restart the core restored service from the jobs' SystemComment.
func TestSqlite3ReadersDoNotLoseLedgerWrites(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [30, 100000]\n  promote_knob: 0\n", "PreemptType=preempt/none", "PreemptMode=OFF")
	a := e.submit("-J", "a", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(a, "RUNNING", 30*time.Second)
	e.eventually(20*time.Second, "a's row in the ledger", func() (bool, string) {
		r, ok := e.ledgerRecord(a)
		return ok && r.RunOpen, fmt.Sprintf("%+v", r)
	})

	for _, ro := range []bool{false, true, false} {
		if got := e.sqlite3(ro, `SELECT count(*) FROM jobs WHERE finished = 0`); got != "1" {
			t.Fatalf("sqlite3 (readonly %v) sees %s active jobs, want 1", ro, got)
		}
		if _, err := os.Stat(e.dbPath() + "-wal"); err != nil {
			t.Fatalf("after sqlite3 (readonly %v) the WAL slurmctld writes to is gone: %v", ro, err)
		}
	}

	// Written after the reads: a new job's row, a's growing run, a model key.
	b := e.submit("-J", "b", "--gpus=1", "--comment=model=after-the-read", "--wrap", "sleep 600")
	e.waitState(b, "RUNNING", 30*time.Second)
	e.eventually(40*time.Second, "b's row and a's run of 20 s or more in the file", func() (bool, string) {
		rb, okb := e.ledgerRecord(b)
		ra, _ := e.ledgerRecord(a)
		return okb && rb.RunOpen && ra.RunSeconds >= 20, fmt.Sprintf("a %+v; b %v %+v", ra, okb, rb)
	})
	e.eventually(40*time.Second, "the model key in the file", func() (bool, string) {
		ro, err := profilestore.OpenReadOnly(e.dbPath())
		if err != nil {
			return false, err.Error()
		}
		defer ro.Close()
		m, err := ro.Missing()
		return err == nil && slices.ContainsFunc(m, func(k profilestore.MissingKey) bool { return k.Key == "after-the-read" }), fmt.Sprint(m, err)
	})
	if got := e.sqlite3(true, fmt.Sprintf(`SELECT count(*) FROM jobs WHERE job_id IN (%d, %d)`, a, b)); got != "2" {
		t.Fatalf("sqlite3 -readonly sees %s of jobs a and b, want 2", got)
	}

	// A clean restart finds everything in the ledger: nothing to restore.
	if err := e.c.StopController(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "a and b ranked again after the restart", func() (bool, string) {
		p := e.prio()
		return p[a].Service >= 40 && p[b].ID == b, fmt.Sprintf("a %+v b %+v", p[a], p[b])
	})
	if e.logMatches(`restored attained service from the job's saved SystemComment`) {
		t.Error("after a clean restart the core restored service from SystemComment: the ledger had lost writes")
	}
}
