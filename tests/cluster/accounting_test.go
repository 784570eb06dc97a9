package cluster_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/sim"
	"github.com/lachesis-sched/lachesis/sim/trace"
)

// With slurmdbd, gres/gpu is an accounted TRES: the plugin counts a job's
// GPUs from its TRES (not its request strings), and sacct has a history
// the simulator can replay ("what would Lachesis have done with my jobs?").
func TestAccountedClusterFeedsTheSimulator(t *testing.T) {
	e := startShapedCluster(t, shape{Nodes: 1, GPUs: 4, Accounting: "slurmdbd"},
		"tiresias:\n  mode: las\n  thresholds: [40, 100000]\n  promote_knob: 0\n",
		// Slurm keeps job comments (model=NAME) in accounting only if asked.
		"AccountingStoreFlags=job_comment")
	// Attained service is GPUs × seconds with the GPU count taken from TRES.
	two := e.submit("-J", "two", "--gpus=2", "--wrap", "sleep 8")
	e.waitState(two, "RUNNING", 30*time.Second)
	d, err := e.c.ShowJob(two)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.AllocTRES, "gres/gpu=2") {
		t.Fatalf("allocated TRES %s; want gres/gpu=2 (is gres/gpu accounted?)", d.AllocTRES)
	}
	e.eventually(15*time.Second, "2 GPUs × seconds of service", func() (bool, string) {
		r, ok := e.ledgerRecord(two)
		return ok && r.RunGPUs == 2 && r.Total() >= 8, fmt.Sprintf("%+v", r)
	})
	// A requeued job: two runs of one JobIDRaw in sacct, folded into one.
	requeued := e.submit("-J", "requeued", "--gpus=1", "--wrap", "sleep 4")
	e.waitState(requeued, "RUNNING", 30*time.Second)
	if _, err := e.c.Run("scontrol", "requeue", strconv.Itoa(int(requeued))); err != nil {
		t.Fatal(err)
	}
	short := e.submit("-J", "short", "--gpus=1", "--comment=model=res18", "--wrap", "sleep 2")
	for _, id := range []uint32{two, requeued, short} {
		e.waitState(id, "COMPLETED", 60*time.Second)
	}
	var out string
	e.eventually(30*time.Second, "sacct to list the three jobs", func() (bool, string) {
		out, err = e.c.Run("sacct", "--allusers", "--duplicates", "--parsable2", "--noheader",
			"--starttime=now-1hour", "--format="+trace.SacctFormat)
		return err == nil && strings.Count(out, "|COMPLETED") >= 3, out
	})
	tr, st, err := trace.ReadSacct(strings.NewReader(out), trace.SacctOptions{})
	if err != nil {
		t.Fatalf("ReadSacct: %v\n%s", err, out)
	}
	if st.Jobs != 3 || st.Requeued != 1 {
		t.Fatalf("sacct gave %+v; want 3 jobs, 1 requeued and folded\n%s", st, out)
	}
	byID := map[uint32]sim.Job{}
	for _, j := range tr.Jobs {
		byID[j.ID] = j
	}
	if byID[two].GPUs != 2 || byID[two].Duration < 7 || byID[short].Model != "res18" {
		t.Fatalf("trace jobs %+v; want job %d with 2 GPUs and ~8 s, job %d with model res18", tr.Jobs, two, short)
	}
	cfg := sim.DefaultConfig()
	cfg.Shape.Nodes, cfg.Shape.GPUsPerNode = 1, 4
	res, err := sim.Run(cfg, tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 3 {
		t.Fatalf("the replay finished %d of 3 jobs", len(res.Jobs))
	}
}
