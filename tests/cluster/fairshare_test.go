package cluster_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestFairShareBeatsFlood (short: the name is part of socket paths): account "flood"
// fills a 4-GPU node and queues two more waves of 1-GPU jobs; account
// "late" submits afterwards. With fair share, flood is over its share once
// its first wave has run a few seconds, so late's jobs take the next free
// GPUs and flood's backlog is still waiting when they start. The same
// workload with fair share off shows the test can fail: late's jobs start
// only after the whole backlog.
func TestFairShareBeatsFlood(t *testing.T) {
	parallelUnlessAlone(t) // its subtests each start a cluster
	for _, tc := range []struct {
		name    string
		enabled bool
	}{
		{"enabled", true},
		{"disabled", false},
	} {
		t.Run(tc.name, func(t *testing.T) { lateAccountVersusFlood(t, tc.enabled) })
	}
}

func lateAccountVersusFlood(t *testing.T, enabled bool) {
	// One queue band for the whole test (thresholds far away, no
	// promotion) so fair share is the only thing that can reorder jobs.
	e := startCluster(t, 1, fmt.Sprintf(
		"tiresias:\n  mode: las\n  thresholds: [1000000]\n  promote_knob: 0\nfairshare:\n  enabled: %v\n  half_life: 3600\n"+
			"  shares: {flood: 1, late: 1}\n", enabled))

	var flood []uint32
	for i := 0; i < 12; i++ {
		flood = append(flood, e.submit("-A", "flood", "-J", fmt.Sprintf("flood-%d", i), "--gpus=1", "--wrap", "sleep 10"))
	}
	// The first wave runs; give the passes a few seconds to charge it.
	for _, id := range flood[:4] {
		e.waitState(id, "RUNNING", 30*time.Second)
	}
	// A lone account is exactly at its share (FAIRSHARE 500) whatever it
	// used; what matters is that it has usage when late arrives: its
	// running jobs' attained service (sprio's JOBSIZE) shows it.
	e.eventually(20*time.Second, "flood's first wave to attain service", func() (bool, string) {
		r := e.prio()[flood[0]]
		return r.Service >= 8, fmt.Sprintf("%+v", r)
	})
	late := []uint32{
		e.submit("-A", "late", "-J", "late-0", "--gpus=1", "--wrap", "sleep 5"),
		e.submit("-A", "late", "-J", "late-1", "--gpus=1", "--wrap", "sleep 5"),
	}
	if enabled {
		// sprio shows the two accounts on either side of their share.
		e.eventually(10*time.Second, "late under and flood over their share in sprio", func() (bool, string) {
			p := e.prio()
			return p[late[0]].FairShare >= 500 && p[flood[5]].FairShare < 500,
				fmt.Sprintf("late %+v flood %+v", p[late[0]], p[flood[5]])
		})
		if !e.logMatches(`account fair-share class account=flood .*over_share=true`) {
			t.Error("slurmctld's log has no line saying flood is over its share")
		}
	}

	all := append(append([]uint32{}, flood...), late...)
	e.eventually(120*time.Second, "every job to finish", func() (bool, string) {
		j := e.jobs()
		var left []string
		for _, id := range all {
			if st := j[id].State; st != "" && st != "COMPLETED" {
				left = append(left, fmt.Sprintf("%d:%s", id, st))
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	})

	// Slurm's own start times decide the order.
	start := map[uint32]time.Time{}
	for _, id := range all {
		d, err := e.c.ShowJob(id)
		if err != nil {
			t.Fatal(err)
		}
		if d.StartTime.IsZero() {
			t.Fatalf("job %d has no start time: %+v", id, d.Fields)
		}
		start[id] = d.StartTime
	}
	lastLate := start[late[0]]
	if start[late[1]].After(lastLate) {
		lastLate = start[late[1]]
	}
	var floodAfter int
	var order []string
	for _, id := range flood {
		if start[id].After(lastLate) {
			floodAfter++
		}
	}
	sorted := append([]uint32{}, all...)
	sort.Slice(sorted, func(a, b int) bool { return start[sorted[a]].Before(start[sorted[b]]) })
	for _, id := range sorted {
		who := "flood"
		if id == late[0] || id == late[1] {
			who = "late"
		}
		order = append(order, fmt.Sprintf("%s@%s", who, start[id].Format("15:04:05")))
	}
	t.Logf("start order: %s", strings.Join(order, " "))
	if enabled && floodAfter < 4 {
		t.Fatalf("with fair share only %d of flood's jobs started after late's; want its backlog (>= 4) still waiting", floodAfter)
	}
	if !enabled && floodAfter != 0 {
		t.Fatalf("without fair share %d of flood's jobs started after late's; want 0 (FIFO drains the backlog first), or this test cannot tell fair share from its absence", floodAfter)
	}
}
