package cluster_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
)

func (e *env) dbPath() string { return filepath.Join(e.dir, "lachesis", "lachesis.db") }

// requeuedJobInQueue1 runs a 2-GPU job until it reaches queue 1 and
// requeues it, so its service lives only in Lachesis's records; a second
// job keeps the other GPUs busy and more wait behind them.
func (e *env) requeuedJobInQueue1() (a, b uint32) {
	e.t.Helper()
	a = e.submit("-J", "a", "--gpus=2", "--wrap", "sleep 600")
	b = e.submit("-J", "b", "--gpus=2", "--wrap", "sleep 600")
	e.waitState(a, "RUNNING", 30*time.Second)
	e.waitState(b, "RUNNING", 30*time.Second)
	for i := 0; i < 3; i++ {
		e.submit("-J", fmt.Sprintf("w%d", i), "--gpus=2", "--wrap", "sleep 600")
	}
	e.waitQueue(a, 1, 40*time.Second)
	if _, err := e.c.Run("scontrol", "requeue", strconv.Itoa(int(a))); err != nil {
		e.t.Fatal(err)
	}
	return a, b
}

// checkPrivate asserts the DB and its -wal/-shm are 0600 (issue 9 item 11).
func (e *env) checkPrivate() {
	e.t.Helper()
	for _, p := range []string{e.dbPath(), e.dbPath() + "-wal", e.dbPath() + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			e.t.Errorf("%s: %v", p, err)
			continue
		}
		if fi.Mode().Perm() != 0o600 {
			e.t.Errorf("%s mode = %v, want 0600", p, fi.Mode().Perm())
		}
	}
}

// jobsKeepStarting cancels b and waits for a waiting job to take its GPUs.
func (e *env) jobsKeepStarting(b uint32) {
	e.t.Helper()
	running := func() int {
		n := 0
		for _, j := range e.jobs() {
			if j.State == "RUNNING" && j.ID != b {
				n++
			}
		}
		return n
	}
	was := running()
	if _, err := e.c.Run("scancel", strconv.Itoa(int(b))); err != nil {
		e.t.Fatal(err)
	}
	e.eventually(30*time.Second, "a waiting job to start on b's GPUs", func() (bool, string) {
		n := running()
		return n > was, fmt.Sprintf("%d running besides b, %d before", n, was)
	})
}

func chattr(t *testing.T, flag string, paths ...string) {
	t.Helper()
	if out, err := exec.Command("chattr", append([]string{flag}, paths...)...).CombinedOutput(); err != nil {
		t.Skipf("chattr %s not supported here: %v %s", flag, err, out)
	}
}

func TestLedgerDeletedWhileRunningIsRewrittenAndPrivate(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [30, 100000]\n  promote_knob: 0\n", "PreemptType=preempt/none", "PreemptMode=OFF")
	a, b := e.requeuedJobInQueue1()
	e.eventually(15*time.Second, "the ledger to hold a's closed run", func() (bool, string) {
		r, _ := e.ledgerRecord(a)
		return r.Runs == 1 && r.RunStart == 0 && r.ServiceClosed >= 30, fmt.Sprintf("%+v", r)
	})
	e.checkPrivate()
	before := e.prio()[a]

	for _, p := range []string{e.dbPath(), e.dbPath() + "-wal", e.dbPath() + "-shm"} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually(15*time.Second, "slurmctld to log the deleted ledger", func() (bool, string) {
		return e.logMatches(`LEDGER FILE DELETED OR REPLACED`) && e.logMatches(`ledger reopened; active jobs queued for rewrite`), ""
	})
	e.eventually(15*time.Second, "the recreated ledger to hold a's service again", func() (bool, string) {
		if _, err := os.Stat(e.dbPath()); err != nil {
			return false, err.Error()
		}
		r, ok := e.ledgerRecord(a)
		return ok && int64(r.ServiceClosed) == before.Service, fmt.Sprintf("%+v", r)
	})
	e.eventually(30*time.Second, "the profile service to reopen the file too", func() (bool, string) {
		return e.logMatches(`profile file reopened; cached profiles stored again`), ""
	})
	e.checkPrivate()

	// (c) model keys noted while writes fail reach `missing` afterwards.
	chattr(t, "+i", e.dbPath(), e.dbPath()+"-wal")
	t.Cleanup(func() { exec.Command("chattr", "-i", e.dbPath(), e.dbPath()+"-wal").Run() })
	e.submit("-J", "keyed", "--gpus=1", "--comment=model=durable-key", "--wrap", "sleep 600")
	e.eventually(40*time.Second, "the key write to fail", func() (bool, string) {
		return e.logMatches(`could not record submitted model keys; keeping them`), ""
	})
	chattr(t, "-i", e.dbPath(), e.dbPath()+"-wal")
	e.eventually(40*time.Second, "the key to reach lachesis-profiler missing", func() (bool, string) {
		ro, err := profilestore.OpenReadOnly(e.dbPath())
		if err != nil {
			return false, err.Error()
		}
		defer ro.Close()
		m, err := ro.Missing()
		return err == nil && strings.Contains(fmt.Sprint(m), "durable-key"), fmt.Sprint(m, err)
	})

	if err := e.c.KillController(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "a's service and queue after restart", func() (bool, string) {
		p := e.prio()[a]
		return p.Service == before.Service && p.Queue == before.Queue, fmt.Sprintf("before %+v after %+v", before, p)
	})
	t.Logf("job %d: service %d GPU-s queue %d before rm; same after restart", a, before.Service, before.Queue)
	e.jobsKeepStarting(b)
}

func TestUnwritableLedgerThenKill9KeepsServiceFromSlurmState(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [30, 100000]\n  promote_knob: 0\n", "PreemptType=preempt/none", "PreemptMode=OFF")
	e.eventually(15*time.Second, "the ledger's WAL to exist", func() (bool, string) {
		_, err := os.Stat(e.dbPath() + "-wal")
		return err == nil, fmt.Sprint(err)
	})
	// From now on every ledger write fails, as on a read-only disk.
	chattr(t, "+i", e.dbPath(), e.dbPath()+"-wal")
	t.Cleanup(func() { exec.Command("chattr", "-i", e.dbPath(), e.dbPath()+"-wal").Run() })
	a, b := e.requeuedJobInQueue1()
	e.eventually(20*time.Second, "ledger writes to fail", func() (bool, string) {
		return e.logMatches(`ledger write failed; keeping the records and retrying`), ""
	})
	e.eventually(20*time.Second, "Slurm to hold a's service marker", func() (bool, string) {
		out, _ := e.c.Run("scontrol", "show", "job", strconv.Itoa(int(a)))
		return strings.Contains(out, "SystemComment=lachesis:v1 sc=") && !strings.Contains(out, "sc=0 "), out
	})
	// slurmctld saves job state a few seconds after a change; a submission
	// now asks for a save that holds the marker.
	marked := time.Now()
	e.submit("-J", "save", "--hold", "--wrap", "true")
	e.waitJobStateSaved(marked)
	before := e.prio()[a]
	if r, ok := e.ledgerRecord(a); ok && r.ServiceClosed > 0 {
		t.Fatalf("the ledger got a's closed run (%+v): the fault did not hold", r)
	}

	if err := e.c.KillController(); err != nil {
		t.Fatal(err)
	}
	chattr(t, "-i", e.dbPath(), e.dbPath()+"-wal")
	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "a's service and queue after restart", func() (bool, string) {
		p := e.prio()[a]
		return p.Service >= before.Service && p.Queue == before.Queue, fmt.Sprintf("before %+v after %+v", before, p)
	})
	if !e.logMatches(`restored attained service from the job's saved SystemComment`) {
		t.Error("slurmctld did not log the restore")
	}
	e.eventually(20*time.Second, "the ledger to hold a's restored service", func() (bool, string) {
		r, _ := e.ledgerRecord(a)
		return int64(r.ServiceClosed) >= before.Service, fmt.Sprintf("%+v", r)
	})
	t.Logf("job %d: service %d GPU-s queue %d before kill -9 (ledger unwritable); %+v after", a, before.Service, before.Queue, e.prio()[a])
	e.jobsKeepStarting(b)
}
