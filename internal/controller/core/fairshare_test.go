package core

import (
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
)

func withAccount(s Snapshot, account string) Snapshot {
	s.Account = account
	return s
}

// floodThenLateComer is the scenario fair share exists for: account "a"
// runs two 1-GPU jobs and has three more waiting in queue 0; account "b"
// submits one job after them.
func floodThenLateComer() []Snapshot {
	return []Snapshot{
		withAccount(running(1, 1, 1000, 1000), "a"),
		withAccount(running(2, 1, 1000, 1000), "a"),
		withAccount(pending(3, 1, 1001), "a"),
		withAccount(pending(4, 1, 1002), "a"),
		withAccount(pending(5, 1, 1003), "a"),
		withAccount(pending(6, 1, 1004), "b"),
	}
}

func TestFairShareOrder(t *testing.T) {
	tests := []struct {
		name        string
		enabled     bool
		wantBBefore bool
	}{
		{"late account's job goes before the flooding account's backlog", true, true},
		{"without fair share the backlog goes first", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			cfg := testConfig(db)
			cfg.Tiresias.FairShare.Enabled = tt.enabled
			store, err := ledger.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			pass(c, 1005, floodThenLateComer()...)
			d := pass(c, 1040, floodThenLateComer()...)
			for _, id := range []uint32{3, 4, 5} {
				if d[id-1].Queue != 0 || d[5].Queue != 0 {
					t.Fatalf("test needs every pending job in queue 0: %+v", d)
				}
				if got := d[5].Priority > d[id-1].Priority; got != tt.wantBBefore {
					t.Errorf("b's job priority %d, a's job %d priority %d: b first = %v, want %v",
						d[5].Priority, id, d[id-1].Priority, got, tt.wantBBefore)
				}
			}
			// a has used 2 GPUs × 40 s; b nothing.
			if u, ok := c.AccountUsage("a"); !ok || math.Abs(u-80) > 0.01 {
				t.Errorf("usage of a = %v (%v), want ~80 GPU-s", u, ok)
			}
			if d[5].Factors.FairShare != 1 || !priority.OverShare(d[2].Factors.FairShare) {
				t.Errorf("factors: b %v (want 1), a %v (want over share)", d[5].Factors.FairShare, d[2].Factors.FairShare)
			}
		})
	}
}

func TestFairShareUsageSurvivesRestartAndDecays(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	pass(c, 1000, withAccount(running(1, 2, 1000, 1000), "a"))
	pass(c, 1100, withAccount(running(1, 2, 1000, 1000), "a")) // 200 GPU-s
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c = openCore(t, db)
	defer c.Close()
	halfLife := int64(c.Config().Tiresias.FairShare.HalfLife)
	if u, ok := c.AccountUsage("a"); !ok || math.Abs(u-200) > 0.01 {
		t.Fatalf("usage of a after restart = %v (%v), want 200 GPU-s", u, ok)
	}
	// The job ended during the outage; one half-life later a's 200 GPU-s
	// count 100, plus nothing new (the job's last run was already charged).
	later := 1100 + halfLife
	d := pass(c, later, withAccount(pending(2, 1, later), "b"))
	if u, _ := c.AccountUsage("a"); math.Abs(u-100) > 0.01 {
		t.Fatalf("usage of a one half-life later = %v, want 100", u)
	}
	if d[0].Factors.FairShare != 1 {
		t.Fatalf("b alone with no usage: factor %v, want 1", d[0].Factors.FairShare)
	}
}

func TestFairSharePlaceUsesTheAccountsLastFactor(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1000, withAccount(running(1, 1, 1000, 1000), "a"), withAccount(pending(2, 1, 1000), "b"))
	pass(c, 1050, withAccount(running(1, 1, 1000, 1000), "a"), withAccount(pending(2, 1, 1000), "b"))
	s := withAccount(pending(3, 1, 1060), "a")
	if d := c.Enqueue(1060, &s); !priority.OverShare(d.Factors.FairShare) {
		t.Errorf("a enqueued with factor %v, want over share", d.Factors.FairShare)
	}
	s = withAccount(pending(4, 1, 1060), "newcomer")
	if d := c.Enqueue(1060, &s); d.Factors.FairShare != 1 {
		t.Errorf("unseen account enqueued with factor %v, want 1", d.Factors.FairShare)
	}
	// Issue 20.6: an account name nobody gave shares to (any user may
	// type one without AccountingStorageEnforce=associations) is enqueued in
	// the lowest class, as the next pass will put it.
	s = withAccount(pending(5, 1, 1060), "x31337")
	if d := c.Enqueue(1060, &s); d.Factors.FairShare != 0 {
		t.Errorf("unknown account enqueued with factor %v, want 0", d.Factors.FairShare)
	}
	d := pass(c, 1070, withAccount(running(1, 1, 1000, 1000), "a"), s)
	if d[1].Factors.FairShare != 0 || d[1].Factors.FairShare > d[0].Factors.FairShare {
		t.Errorf("unknown account's factor %v after a pass, a's %v; want 0", d[1].Factors.FairShare, d[0].Factors.FairShare)
	}
}

func TestAccountNamesInternsAndBounds(t *testing.T) {
	var n AccountNames
	a1 := n.Intern([]byte("physics"))
	a2 := n.Intern([]byte("physics"))
	if a1 != "physics" || a2 != a1 || unsafeData(a1) != unsafeData(a2) {
		t.Fatalf("same bytes gave different strings")
	}
	allocs := leastAllocs(100, func() { _ = n.Intern([]byte("physics")) })
	if allocs != 0 {
		t.Errorf("interning a known name allocates %v times", allocs)
	}
	long := make([]byte, priority.MaxAccountName+50)
	for i := range long {
		long[i] = 'x'
	}
	if got := n.Intern(long); len(got) != priority.MaxAccountName {
		t.Errorf("overlong name kept %d bytes, want %d", len(got), priority.MaxAccountName)
	}
	if n.Intern(nil) != "" {
		t.Error("no name must intern as \"\"")
	}
}

// A finished job stays in slurmctld's list (MinJobAge) and every pass sees
// it again; its service must count once in its account's usage, however
// many passes see it finished.
func TestFairShareChargesAFinishedJobOnce(t *testing.T) {
	tests := []struct {
		name      string
		seenFirst Snapshot // the first pass's view of job 1
		want      float64
	}{
		{"a job seen running then finished is charged its run once",
			withAccount(running(1, 2, 1000, 1000), "a"), 300},
		{"a job that ran between two passes is charged once",
			withAccount(pending(1, 2, 1000), "a"), 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
			defer c.Close()
			other := withAccount(pending(2, 1, 1000), "b") // keeps a's usage in the table's passes
			pass(c, 1000, tt.seenFirst, other)
			fin := withAccount(Snapshot{ID: 1, State: StateFinished, GPUs: 2, SubmitTime: 1000, StartTime: 1000, EndTime: 1150}, "a")
			for now := int64(1200); now <= 1500; now += 30 {
				pass(c, now, fin, other)
			}
			// Half-life is a week: 300 s of decay is negligible.
			if u, _ := c.AccountUsage("a"); math.Abs(u-tt.want) > 0.5 {
				t.Fatalf("usage of a after 11 passes saw its job finished = %v, want %v (2 GPUs × 150 s, once)", u, tt.want)
			}
			// Once slurmctld purges the job and lists it again (a job id
			// reused after a restart of the id counter), it is a new job.
			pass(c, 1600, other)
			pass(c, 1700, fin, other)
			if u, _ := c.AccountUsage("a"); math.Abs(u-2*tt.want) > 1 {
				t.Fatalf("usage of a after the job id came back = %v, want %v", u, 2*tt.want)
			}
		})
	}
}

// slurmctld lists a finished job for MinJobAge; a restart in that window
// must not charge it to its account again (the new core holds no record
// for it, only the ledger knows it finished).
func TestFairShareChargesAFinishedJobOnceAcrossARestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "l.db")
	c := openCore(t, db)
	other := withAccount(pending(2, 1, 1000), "b")
	fin := withAccount(Snapshot{ID: 1, State: StateFinished, GPUs: 2, SubmitTime: 1000, StartTime: 1000, EndTime: 1150}, "a")
	pass(c, 1000, withAccount(running(1, 2, 1000, 1000), "a"), other)
	pass(c, 1200, fin, other)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = openCore(t, db)
	defer c.Close()
	for now := int64(1230); now <= 1500; now += 30 {
		pass(c, now, fin, other)
	}
	if u, _ := c.AccountUsage("a"); math.Abs(u-300) > 0.5 {
		t.Fatalf("usage of a after a restart while its finished job is still listed = %v, want 300 (2 GPUs × 150 s, once)", u)
	}
	// Purged, then listed again (an id reused): a new job, charged.
	pass(c, 1600, other)
	pass(c, 1700, fin, other)
	if u, _ := c.AccountUsage("a"); math.Abs(u-600) > 1 {
		t.Fatalf("usage of a after the job id came back = %v, want 600", u)
	}
}
