package cluster_test

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// TestFairShareSlurmdbd: fair share with the shares set where a Slurm site
// sets them, in slurmdbd's associations (sacctmgr), on a cluster with a
// real slurmdbd and MariaDB. lachesis.yaml deliberately says otherwise
// (flood 9, late 1), so a silent fallback to its shares fails the test:
//
//   - equal association shares (1:1): account "flood" floods a 4-GPU node,
//     account "late" queues as many jobs afterwards, and of the next 16
//     starts late gets about half (with yaml's 9:1 it would get about a
//     quarter: its first wave, then nothing while it is over its 10 %;
//     without fair share none; if it always won, all);
//   - the association changed to 1:3 in sacctmgr while slurmctld runs: the
//     factors sprio shows obey 2^(−U/S) with S from 1:3, not from 9:1.
//
// The slurmctld log says which shares the core used for each account.
func TestFairShareSlurmdbd(t *testing.T) {
	// Equal shares in the associations; root may charge both accounts.
	e := startSlurmdbdCluster(t, 4,
		// One queue band (no thresholds in reach, no promotion) so that
		// fair share is the only thing that can reorder jobs.
		"tiresias:\n  mode: las\n  thresholds: [1000000]\n  promote_knob: 0\n"+
			"fairshare:\n  enabled: true\n  half_life: 3600\n  shares:\n    flood: 9\n    late: 1\n",
		"flood", "late")

	// late has more jobs than the window, so a late account that always
	// won (shares ignored the other way) would get every start in it.
	const floodJobs, lateJobs, window = 20, 20, 16
	var flood, late []uint32
	for i := range floodJobs {
		flood = append(flood, e.submit("-A", "flood", "-J", fmt.Sprintf("flood-%d", i), "--gpus=1", "--wrap", "sleep 5"))
	}
	for _, id := range flood[:4] {
		e.waitState(id, "RUNNING", 30*time.Second)
	}
	// flood must have usage when late arrives.
	e.eventually(20*time.Second, "flood's first wave to attain service", func() (bool, string) {
		r := e.prio()[flood[0]]
		return r.Service >= 4, fmt.Sprintf("%+v", r)
	})
	for i := range lateJobs {
		late = append(late, e.submit("-A", "late", "-J", fmt.Sprintf("late-%d", i), "--gpus=1", "--wrap", "sleep 5"))
	}
	isLate := map[uint32]bool{}
	for _, id := range late {
		isLate[id] = true
	}
	after := append(append([]uint32{}, flood[4:]...), late...)
	// Enough starts after late queued to fill the window (four rounds of
	// four GPUs), and the state of each at that moment.
	e.eventually(90*time.Second, fmt.Sprintf("%d jobs to start after late queued", window), func() (bool, string) {
		j := e.jobs()
		n := 0
		for _, id := range after {
			if st := j[id].State; st == "RUNNING" || st == "COMPLETING" || st == "COMPLETED" {
				n++
			}
		}
		return n >= window, fmt.Sprintf("%d started", n)
	})
	lateSubmit := e.detail(late[0]).SubmitTime
	type start struct {
		id uint32
		at time.Time
	}
	var starts []start
	for _, id := range after {
		d := e.detail(id)
		if d.State == "PENDING" || d.StartTime.IsZero() {
			continue // a pending job's StartTime is only an estimate
		}
		if d.StartTime.Before(lateSubmit) {
			t.Fatalf("job %d started at %v, before late queued at %v: flood's first wave was not the whole node", id, d.StartTime, lateSubmit)
		}
		starts = append(starts, start{id, d.StartTime})
	}
	sort.SliceStable(starts, func(a, b int) bool { return starts[a].at.Before(starts[b].at) })
	// The first `window` starts, and any in the same second as the last
	// (start times are whole seconds: the order within one is unknown).
	cut := starts[window-1].at
	var lateStarted, total int
	var order []string
	for _, s := range starts {
		if s.at.After(cut) {
			break
		}
		total++
		who := "flood"
		if isLate[s.id] {
			who = "late"
			lateStarted++
		}
		order = append(order, fmt.Sprintf("%s@%s", who, s.at.Format("15:04:05")))
	}
	share := float64(lateStarted) / float64(total)
	t.Logf("starts after late queued: %s", strings.Join(order, " "))
	t.Logf("late got %d of %d starts (%.0f%%)", lateStarted, total, 100*share)
	// Rounds of four GPUs: late wins the first (no usage), then the
	// accounts alternate as their usages cross, give or take one round:
	// 8 to 12 of 16.
	if share < 0.4 || share > 0.8 {
		t.Errorf("late got %d of the %d starts after it queued (%.0f%%); with equal association shares want about half (40%% to 80%%)", lateStarted, total, 100*share)
	}
	for _, acct := range []string{"flood", "late"} {
		if !e.logMatches(`account fair-share class account=` + acct + ` shares=1 `) {
			t.Errorf("slurmctld's log has no fair-share line for %s with its association's shares=1 (yaml says otherwise)", acct)
		}
	}

	// Second part: unequal association shares, set while slurmctld runs.
	// Nothing runs from here on, so both usages decay alike and their
	// fractions stay put.
	// By id, and again for any job a cancel raced with (one that started
	// between scancel's listing and its request stays running).
	e.eventually(30*time.Second, "every job to leave the queue", func() (bool, string) {
		var left []string
		ids := []string{}
		for id, j := range e.jobs() {
			if j.State == "PENDING" || j.State == "RUNNING" {
				ids = append(ids, strconv.Itoa(int(id)))
			}
			if j.State == "PENDING" || j.State == "RUNNING" || j.State == "COMPLETING" {
				left = append(left, fmt.Sprintf("%d:%s", id, j.State))
			}
		}
		if len(ids) > 0 {
			e.c.Run("scancel", ids...) // a job that ended meanwhile makes it complain
		}
		return len(left) == 0, strings.Join(left, " ")
	})
	// A pass with neither account's jobs: the next jobs log their class
	// (and shares) again.
	e.waitPasses(2)
	e.sacctmgr("modify", "account", "late", "set", "Fairshare=3")
	e.waitAssocShares(map[string]int{"flood": 1, "late": 3})
	// Pending until a begin time far away: in every pass, never running.
	fl := e.submit("-A", "flood", "-J", "flood-wait", "--gpus=1", "--begin=now+600", "--wrap", "sleep 5")
	la := e.submit("-A", "late", "-J", "late-wait", "--gpus=1", "--begin=now+600", "--wrap", "sleep 5")
	var ff, fl2 float64
	// Both accounts have usage from the first part, so both factors are
	// under 1 once a pass has ranked the two jobs together (until then
	// sprio shows what slurmctld's submit-time placement gave: 1).
	e.eventually(20*time.Second, "sprio to show both waiting jobs' fair-share factors from a pass", func() (bool, string) {
		p := e.prio()
		ff, fl2 = float64(p[fl].FairShare)/1000, float64(p[la].FairShare)/1000
		return ff > 0 && ff < 1 && fl2 > 0 && fl2 < 1, fmt.Sprintf("flood %+v late %+v", p[fl], p[la])
	})
	// F = 2^(−u/s) with u the usage fraction and s the shares fraction:
	// u = −s·log2 F, and the two accounts' u add up to 1 only with the
	// shares the core really used.
	usageFrac := func(sFlood, sLate float64) float64 {
		return -sFlood*math.Log2(ff) - sLate*math.Log2(fl2)
	}
	assoc, yaml := usageFrac(0.25, 0.75), usageFrac(0.9, 0.1)
	t.Logf("sprio FAIRSHARE flood %.3f late %.3f: usage fractions add up to %.3f with the association's 1:3, %.3f with yaml's 9:1", ff, fl2, assoc, yaml)
	if math.Abs(assoc-1) > 0.03 {
		t.Errorf("sprio's factors (flood %.3f, late %.3f) do not follow the association's shares 1:3: usage fractions add up to %.3f, want 1 (with yaml's 9:1: %.3f)", ff, fl2, assoc, yaml)
	}
	if !e.logMatches(`account fair-share class account=late shares=3 `) {
		t.Error("slurmctld's log has no fair-share line for late with the association's new shares=3")
	}
}

// startSlurmdbdCluster starts a one-node cluster of gpus GPUs with a real
// slurmdbd and MariaDB, adds accounts, each with fair share 1 and root as
// a user, and waits until slurmctld has their associations. No daemon of
// the cluster (MariaDB and slurmdbd included) may outlive the test.
func startSlurmdbdCluster(t *testing.T, gpus int, yaml string, accounts ...string) *env {
	t.Helper()
	dir := clusterDir(t)
	// Registered first, so it runs after the cluster's own cleanup.
	t.Cleanup(func() { checkNoDaemonsUnder(t, dir) })
	e := startShapedCluster(t, shape{Nodes: 1, GPUs: gpus, Accounting: "slurmdbd"}, yaml)
	list := strings.Join(accounts, ",")
	e.sacctmgr("add", "account", list, "Fairshare=1")
	e.sacctmgr("add", "user", "root", "Account="+list)
	shares := make(map[string]int, len(accounts))
	for _, a := range accounts {
		shares[a] = 1
	}
	e.waitAssocShares(shares)
	return e
}

// sacctmgr runs `sacctmgr -i args...` (no confirmation prompt).
func (e *env) sacctmgr(args ...string) {
	e.t.Helper()
	if _, err := e.c.Run("sacctmgr", append([]string{"-i"}, args...)...); err != nil {
		e.t.Fatal(err)
	}
}

// waitAssocShares waits until slurmctld's association manager (not only
// slurmdbd) has each account's association with the given raw shares and
// a user association for root under it, which jobs of root -A acct need.
func (e *env) waitAssocShares(want map[string]int) {
	e.t.Helper()
	e.eventually(30*time.Second, fmt.Sprintf("slurmctld's associations to have shares %v", want), func() (bool, string) {
		accts := make([]string, 0, len(want))
		for a := range want {
			accts = append(accts, a)
		}
		out, err := e.c.Run("scontrol", "show", "assoc_mgr", "flags=assoc", "accounts="+strings.Join(accts, ","))
		if err != nil {
			return false, err.Error()
		}
		got := map[string]int{}
		users := map[string]bool{}
		acct, user := "", ""
		for _, f := range strings.Fields(out) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "Account":
				acct = v
			case "UserName":
				user = v
			case "SharesRaw/Norm/Level/Factor":
				raw, _, _ := strings.Cut(v, "/")
				n, err := strconv.Atoi(raw)
				if err != nil {
					return false, fmt.Sprintf("cannot read %q", f)
				}
				if user == "" {
					got[acct] = n
				} else if strings.HasPrefix(user, "root(") {
					users[acct] = true
				}
			}
		}
		for a, n := range want {
			if got[a] != n || !users[a] {
				return false, fmt.Sprintf("account shares %v, root's associations %v", got, users)
			}
		}
		return true, ""
	})
}

func (e *env) detail(id uint32) slurmcluster.JobDetail {
	e.t.Helper()
	d, err := e.c.ShowJob(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// checkNoDaemonsUnder fails the test if any live process still belongs to
// the cluster in dir: its command line names a path under dir (slurmctld
// -f, slurmd -f, munged --socket, mariadbd --datadir), or its environment
// points SLURM_CONF there (slurmdbd, which takes no config option).
func checkNoDaemonsUnder(t *testing.T, dir string) {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	needle := []byte(dir + "/")
	conf := []byte("SLURM_CONF=" + filepath.Join(dir, "etc", "slurm.conf"))
	var left []string
	for _, p := range procs {
		if p == fmt.Sprintf("/proc/%d", os.Getpid()) {
			continue
		}
		cmd, err := os.ReadFile(p + "/cmdline")
		if err != nil || len(cmd) == 0 { // gone, or a zombie: holds nothing
			continue
		}
		env, _ := os.ReadFile(p + "/environ")
		if (bytes.Contains(cmd, needle) || bytes.Contains(env, conf)) && inOurRoot(filepath.Base(p)) {
			left = append(left, fmt.Sprintf("%s: %s", filepath.Base(p), bytes.ReplaceAll(cmd, []byte{0}, []byte{' '})))
		}
	}
	if len(left) > 0 {
		t.Errorf("processes of the cluster in %s still running after teardown:\n%s", dir, strings.Join(left, "\n"))
	}
}
