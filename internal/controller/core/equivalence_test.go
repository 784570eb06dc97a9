package core

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/sim"
)

// The simulator is only evidence about Lachesis if it runs what slurmctld
// runs. This test lets the simulator schedule a small busy workload, then
// replays the exact history it produced (arrivals, runs, requeues,
// completions) into the core as Slurm would report it, one pass per
// second, and checks that both kept the same books: every job's attained
// service, runs and promotions, and that every requeue the simulator made
// is one the core's preemption rule allows.
func TestCoreAndSimulatorKeepTheSameBooks(t *testing.T) {
	// 2 nodes × 4 GPUs; long jobs that get demoted and preempted, short
	// ones that preempt them, a promote knob that brings starved jobs back.
	jobs := []sim.Job{
		{ID: 1, Submit: 0, GPUs: 4, Duration: 90},
		{ID: 2, Submit: 0, GPUs: 4, Duration: 80},
		{ID: 3, Submit: 5, GPUs: 2, Duration: 30},
		{ID: 4, Submit: 7, GPUs: 1, Duration: 8},
		{ID: 5, Submit: 9, GPUs: 2, Duration: 12},
		{ID: 6, Submit: 12, GPUs: 1, Duration: 6},
		{ID: 7, Submit: 20, GPUs: 4, Duration: 25},
		{ID: 8, Submit: 26, GPUs: 2, Duration: 40},
		{ID: 9, Submit: 31, GPUs: 1, Duration: 9},
		{ID: 10, Submit: 40, GPUs: 3, Duration: 15},
		{ID: 11, Submit: 55, GPUs: 1, Duration: 50},
		{ID: 12, Submit: 60, GPUs: 2, Duration: 7},
	}
	tcfg := priority.DefaultConfig()
	tcfg.FixThresholds([]float64{40, 200})
	tcfg.PromoteKnob = 1
	// Preemption's costs scaled to this workload's seconds: a victim must
	// have run 3 s; promoted jobs preempt, so promotions cause requeues.
	tcfg.Preemption = priority.Preemption{MinRun: 3, QueueGap: 1, PromotedPreempts: true}
	// A trace has no users and no cancellations: inheriting service across
	// resubmissions is the core's alone (the simulator's options turn it
	// off), so the books are compared without it.
	tcfg.InheritService = false
	for _, mode := range []priority.Mode{priority.ModeLAS, priority.ModeGittins} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := sim.DefaultConfig()
			cfg.Shape = sim.Shape{Nodes: 2, GPUsPerNode: 4, GPUCountOnly: true}
			cfg.Policy = string(mode)
			cfg.PolicyOptions.Tiresias = tcfg
			cfg.NoCosts()
			cfg.RequeueHold = 2
			cfg.PassInterval = 1
			cfg.TickPassesOnly = true // every event on a whole second, as Slurm's times are
			cfg.Models = sim.ModelsAsGiven
			cfg.RecordRuns = true
			res, err := sim.Run(cfg, &sim.Trace{Name: "equivalence", Jobs: jobs})
			if err != nil {
				t.Fatal(err)
			}
			h := historyOf(t, res)
			if h.preemptions == 0 || h.promotedAll == 0 {
				t.Fatalf("the workload must exercise requeues and promotions; got %d and %d", h.preemptions, h.promotedAll)
			}
			t.Logf("simulator: %d requeues, %d promotions", h.preemptions, h.promotedAll)
			replayIntoCore(t, mode, tcfg, jobs, h)
		})
	}
}

// history is what the simulator did, in whole seconds.
type history struct {
	runs        map[uint32][][2]int64 // per job: [start, end) of each run
	finish      map[uint32]int64
	promotions  map[uint32]int
	preempted   map[uint32]int // preemptions per job
	end         int64
	preemptions int
	promotedAll int
}

func historyOf(t *testing.T, res *sim.Result) history {
	t.Helper()
	whole := func(v float64) int64 {
		if v != math.Trunc(v) {
			t.Fatalf("time %v is not a whole second", v)
		}
		return int64(v)
	}
	h := history{runs: map[uint32][][2]int64{}, finish: map[uint32]int64{}, promotions: map[uint32]int{}, preempted: map[uint32]int{}}
	for _, r := range res.Runs {
		h.runs[r.JobID] = append(h.runs[r.JobID], [2]int64{whole(r.Start), whole(r.End)})
	}
	for _, j := range res.Jobs {
		h.finish[j.ID] = whole(j.Finish)
		h.end = max(h.end, h.finish[j.ID])
		h.promotions[j.ID] = j.Promotions
		h.preempted[j.ID] = j.Preemptions
		h.preemptions += j.Preemptions
		h.promotedAll += j.Promotions
	}
	return h
}

// base shifts the simulator's seconds to Unix times: Slurm never reports a
// start time of 0.
const base = 1_000_000

func replayIntoCore(t *testing.T, mode priority.Mode, tcfg priority.Config, jobs []sim.Job, h history) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "ledger.db")
	ccfg := testConfig(db)
	ccfg.Tiresias = tcfg
	ccfg.Tiresias.Mode = mode
	store, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(ccfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var clock int64
	c.clock = func() int64 { return clock }
	var problems []string
	reported := map[uint32]bool{}
	for now := int64(0); now <= h.end+1; now++ {
		// The state Slurm would report at now, before the scheduler acts
		// at now: a run ending at now is still running, one starting at
		// now has not started.
		var snaps []Snapshot
		for _, j := range jobs {
			submit := int64(j.Submit)
			if submit > now || reported[j.ID] {
				continue
			}
			s := Snapshot{ID: j.ID, State: StatePending, GPUs: uint32(j.GPUs), SubmitTime: base + submit}
			if fin := h.finish[j.ID]; fin < now {
				runs := h.runs[j.ID]
				last := runs[len(runs)-1]
				s.State, s.StartTime, s.EndTime, s.EndState = StateFinished, base+last[0], base+fin, EndCompleted
				reported[j.ID] = true
			} else {
				for _, r := range h.runs[j.ID] {
					if r[0] < now && now <= r[1] {
						s.State, s.StartTime = StateRunning, base+r[0]
					}
				}
			}
			snaps = append(snaps, s)
		}
		clock = base + now
		pass(c, base+now, snaps...)
		// Every run the simulator ended at now before the job's finish is a
		// requeue for a job that started at now: the core must allow it.
		for victim, runs := range h.runs {
			for _, r := range runs {
				if r[1] != now || h.finish[victim] == now {
					continue
				}
				allowed := false
				for p, pr := range h.runs {
					for _, q := range pr {
						if q[0] == now && c.Preemptable(p, victim) {
							allowed = true
						}
					}
				}
				if !allowed {
					problems = append(problems, fmt.Sprintf("t=%d: the simulator requeued job %d, which no job starting then may preempt in the core", now, victim))
				}
				// Slurm then preempts it, asking preempt/tiresias its
				// grace time.
				c.Preempting(victim, base+now)
			}
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := ledger.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	for _, j := range jobs {
		rec, ok, err := reopened.Get(j.ID)
		if err != nil || !ok {
			t.Fatalf("job %d: no ledger record (%v)", j.ID, err)
		}
		var service float64
		for _, r := range h.runs[j.ID] {
			service += float64(j.GPUs) * float64(r[1]-r[0])
		}
		if rec.Total() != service {
			problems = append(problems, fmt.Sprintf("job %d: core service %v, simulator %v", j.ID, rec.Total(), service))
		}
		if rec.Runs != len(h.runs[j.ID]) {
			problems = append(problems, fmt.Sprintf("job %d: core counted %d runs, simulator %d", j.ID, rec.Runs, len(h.runs[j.ID])))
		}
		if rec.Preemptions != h.preempted[j.ID] {
			problems = append(problems, fmt.Sprintf("job %d: core counted %d preemptions, simulator %d", j.ID, rec.Preemptions, h.preempted[j.ID]))
		}
		if rec.Promotions != h.promotions[j.ID] {
			problems = append(problems, fmt.Sprintf("job %d: core promoted it %d times, simulator %d", j.ID, rec.Promotions, h.promotions[j.ID]))
		}
		if rec.Finished != base+h.finish[j.ID] {
			problems = append(problems, fmt.Sprintf("job %d: core finished it at %d, simulator %d", j.ID, rec.Finished-base, h.finish[j.ID]))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%d differences:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
