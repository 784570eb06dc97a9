package core

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/internal/rigs/refdata"
	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// The pass's sharing stage (gpushare) judges the jobs the way the pass
// ranked them and the pass applies its answers; gpushare's own tests
// cover what it decides, these that its answers reach Slurm.

const (
	owner   = 1001
	mallory = 1002
)

func runningAs(id, uid uint32) Snapshot {
	s := running(id, 2, 1000, 1000)
	s.User = uid
	return s
}

// useReport is node n1's report at t of one job on GPU gpu alone.
func useReport(t int64, job, uid uint32, gpu string, util, iters float64) *wire.JobUsageReport {
	return &wire.JobUsageReport{Node: "n1", At: time.Unix(t, 0), IntervalSec: 10, Jobs: []wire.JobUsage{{JobID: job, UID: uid,
		GPUs:     []wire.JobGPUUsage{{UUID: gpu, UtilPct: util, MemUsedMB: 9318, Sharers: 1}},
		Progress: &wire.JobProgress{Iterations: uint64(t), ItersPerSec: iters}}}}
}

// A running job's GPU use becomes its AdminComment segment (Decision.GPUUse).
func TestTheSharingStageGivesARunningJobItsGPUUseSegment(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	pass(c, 1010, runningAs(1, owner))
	c.sharing.ReportGPUUse(useReport(1020, 1, owner, "g0", 80, 12.5))
	d := pass(c, 1040, runningAs(1, owner))
	if want := "[GPU use: mean 80%, peak 80%, memory peak 9.1 GiB, 12.5 it/s, 1 sample]"; d[0].GPUUse != want {
		t.Fatalf("usage segment %q, want %q", d[0].GPUUse, want)
	}
}

// A waiting opportunistic job the pass ranked gets its reason, with the
// upgrade time its record and promote_after give; a job whose refused
// preemption the pass shows keeps that reason; guaranteed and running
// jobs get none.
func TestTheSharingStageGivesRankedWaitingGuestsTheirReason(t *testing.T) {
	c := openOppCore(t, filepath.Join(t.TempDir(), "l.db"), &bytes.Buffer{})
	defer c.Close()
	d := pass(c, 1000, inClassPartition(pending(1, 1, 900), "opp"), inClassPartition(pending(2, 1, 900), "gpu"),
		inClassPartition(running(3, 1, 900, 950), "opp"))
	upgrade := time.Unix(1200, 0).Format("2006-01-02T15:04:05")
	want := reasontext.WaitingPrefix + "opportunistic: waits its turn by attained service, evicted first; guaranteed from " + upgrade
	if d[0].Blocked != want {
		t.Fatalf("waiting guest's reason %q, want %q", d[0].Blocked, want)
	}
	if d[1].Blocked != "" || d[2].Blocked != "" {
		t.Fatalf("reasons of a guaranteed and a running job: %q, %q", d[1].Blocked, d[2].Blocked)
	}
}

// Under the strict rule (sharing.strict_opportunistic), each waiting
// guest's best predicted pair, judged by one pass, ranks the guests of one
// queue at the next (priority.Job.Pair): ResNet-50 is predicted at 0.52
// of alone beside ResNet-18 (Gavel, V100), LM/bs80 at full speed, so
// LM/bs80 goes first. (By default guests share queues with guaranteed
// jobs, and a pair score reorders no one: priority's
// TestOpportunisticJobsCompeteByAttainedService.)
func TestStrictTheGuestWithTheBetterPredictedPairRanksFirst(t *testing.T) {
	cfg := testConfig(filepath.Join(t.TempDir(), "l.db"))
	cfg.Sharing = config.Sharing{OpportunisticPartition: "opp", Rules: sharing.DefaultConfig(),
		PairTable: filepath.Dir(refdata.Path(t, "gavel/colocated.csv")), PairTableGPU: "v100"}
	cfg.Sharing.Rules.StrictOpportunistic = true
	cfg.Tiresias.Opportunistic.Enabled = true
	cfg.Tiresias.Opportunistic.Rules.StrictOpportunistic = true
	c := openCoreWith(t, cfg)
	defer c.Close()
	host := runningAs(1, owner)
	host.GPUs, host.GPUShare, host.Partition, host.Run = 0, true, "gpu", &fakeRun{model: "resnet-18/bs64"}
	host.NodeGPUs, host.GresRequest.Nodes = 1, 1
	guest := func(id uint32, model string) Snapshot {
		return Snapshot{ID: id, State: StatePending, SubmitTime: 900, User: mallory, Partition: "opp", GPUShare: true, Asked: askedModel(model)}
	}
	bad, good := guest(2, "ResNet-50/bs64"), guest(3, "lm/bs80")
	pass(c, 1000, host, bad, good)
	c.sharing.ReportGPUUse(useReport(1005, 1, owner, "g0", 90, 10))
	pass(c, 1010, host, bad, good) // judges the guests beside the host
	d := pass(c, 1020, host, bad, good)
	if !(d[2].Priority > d[1].Priority) || d[2].Factors.Pair < 0.95 {
		t.Fatalf("good guest priority %d (pair %v), bad %d (pair %v): want the good pair first", d[2].Priority, d[2].Factors.Pair, d[1].Priority, d[1].Factors.Pair)
	}
	if !strings.Contains(d[1].Blocked, "kept off node n1") {
		t.Fatalf("the bad guest's reason %q does not name the node it is kept off", d[1].Blocked)
	}
}

type askedModel string

func (m askedModel) ModelKey() string { return string(m) }
