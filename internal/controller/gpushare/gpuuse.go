package gpushare

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Per-job GPU use. Node agents measure what each Slurm job does with its
// GPUs (wire.JobUsageReport, frame type 5); the listener authenticates
// the frame (only root, SlurmUser or agent.allowed_uids may send one) and
// bounds it, and ReportGPUUse folds it into a running summary per job
// (ledger.JobGPUUse). Nothing in a report is taken on trust: an entry
// counts only for a job the last pass saw running, owned by the uid the
// entry names. The node is not checked against the job's allocation: the
// pass copies no node list, and the node a report names is its agent's
// own claim (a munge credential names a uid, not a host), so root on one
// node could name any node anyway; what no report can do is describe a
// job that is not running or give it another owner. Summaries live in
// memory under mu; the writer goroutine saves them (job_gpu_use), and the
// pass shows each running job's in its AdminComment and applies the idle
// rule (usage.idle_below_pct, usage.idle_after).

// GPUUsePrefix starts Lachesis's GPU-use segment in a job's AdminComment,
// which runs to the next ']' (cgo/lachesis_core.h LACHESIS_USAGE_PREFIX).
// Users' text in an AdminComment has every bracket removed
// (slurmctld-hook/reason_text.h), so no user can spell it.
const GPUUsePrefix = "[GPU use: "

// GPUUseMax bounds the usage segment (the C side's buffer is larger).
const GPUUseMax = 150

// Reasons an entry of a usage report is dropped: the label of
// lachesis_usage_dropped_total and the keys of the log line.
const (
	DropUnknownJob = "unknown_job" // not running, as far as the last pass saw
	DropWrongUser  = "wrong_user"  // the entry's uid is not the job's owner
	DropNoGPUs     = "no_gpus"     // nothing measured
	DropRepeat     = "repeat"      // not newer than the last report of its node for the job
)

// dropReason indexes dropReasons.
type dropReason int

const (
	dropUnknownJob dropReason = iota
	dropWrongUser
	dropNoGPUs
	dropRepeat
)

var dropReasons = [...]string{dropUnknownJob: DropUnknownJob, dropWrongUser: DropWrongUser, dropNoGPUs: DropNoGPUs, dropRepeat: DropRepeat}

// droppedEntry is the last dropped entry, formatted only when logged.
type droppedEntry struct {
	job, uid uint32
	node     string
	reason   dropReason
}

// dropLogEvery: dropped entries are logged at most once a minute.
const dropLogEvery = 60

// gpuUseShowEvery: a job's AdminComment segment is rewritten at most once
// a minute. Agents report more often than passes run, so without it every
// running job's comment would be made and rewritten under the job write
// lock every pass (BenchmarkObserveUsage: 25000 running jobs, 50-80 ms).
const gpuUseShowEvery = 60

// maxNodesPerJob bounds the per-node report times kept for one job (a
// retried report is recognised by them); a job on more nodes is not
// checked for repeats beyond them.
const maxNodesPerJob = 256

const (
	keyUID       = "uid"
	keyMeanUtil  = "mean_util_pct"
	keyIdleFor   = "idle_s"
	keyIdleBelow = "below_pct"
)

// liveJob is a job the last pass saw running or suspended.
type liveJob struct {
	uid  uint32
	pass uint64 // the pass that last saw it
	// running (not suspended), opportunistic (ranked in that class) and
	// model (its model key; read only for jobs on a share of a GPU) are what
	// introspection pairs jobs by (introspect.go).
	running, opportunistic bool
	model                  string
	// gpuShare: it holds a share of a GPU (shards or MPS), not whole
	// GPUs; oneNode: on one node, which has nodeGPUs GPUs (occupancy,
	// exclude.go).
	gpuShare, oneNode bool
	nodeGPUs          uint32
}

// jobGPUUse is a running job's summary and what the core last did with it.
type jobGPUUse struct {
	sum     ledger.JobGPUUse
	nodeAt  map[string]int64 // the newest report time of each node
	shown   int64            // sum.Samples when the AdminComment was last set
	shownAt int64            // the pass (its now) that set it
	idle    bool             // logged as idle (cleared when it is not)
	seen    uint64           // the pass that last saw the job not finished
	rates   introRates       // its rate alone and shared (introspect.go)
	// model (lower case) and oneGPU (it holds one GPU, or shards of one,
	// on one node), read once from the pass: whether and where the job
	// joins its user's history when it ends (shardconvert.go).
	model  string
	oneGPU bool
	mem    []memSample // its last memory sample of each GPU (memguard.go)
}

// gpuUseState is per-job GPU use, and which jobs the last pass saw run;
// under Sharing.mu.
type gpuUseState struct {
	// pass counts Judge's passes (live.pass, seen).
	pass uint64
	live map[uint32]liveJob
	jobs map[uint32]*jobGPUUse
	// dirty: summaries changed since the writer last took them.
	dirty map[uint32]ledger.JobGPUUse
	// dropped entries by reason since the last log line, the last one, and
	// when the last line was written.
	drops    [len(dropReasons)]int
	lastDrop droppedEntry
	loggedAt int64
	// idleBelow is usage.idle_below_pct, copied by each pass so that
	// reports need not take the core's lock.
	idleBelow float64
	// unaccounted: each node's last report of GPU use no job accounts
	// for (memguard.go), at most maxUnaccountedNodes nodes.
	unaccounted map[string]unaccountedReport
}

func (u *gpuUseState) init() {
	if u.live == nil {
		u.live = map[uint32]liveJob{}
		u.jobs = map[uint32]*jobGPUUse{}
		u.dirty = map[uint32]ledger.JobGPUUse{}
	}
}

// ReportGPUUse takes a node's per-job GPU usage report (validated by the
// listener). It touches memory only; safe from any goroutine.
func (c *Sharing) ReportGPUUse(rep *wire.JobUsageReport) {
	now := time.Now().Unix()
	at := rep.At.Unix()
	if rep.At.IsZero() || at > now {
		at = now // an agent's clock ahead of ours: never in the future
	}
	u := &c.use
	c.mu.Lock()
	defer c.mu.Unlock()
	u.init()
	for i := range rep.Jobs {
		e := &rep.Jobs[i]
		live, ok := u.live[e.JobID]
		switch {
		case !ok:
			c.dropGPUUse(now, dropUnknownJob, e, rep.Node)
			continue
		case live.uid != e.UID:
			c.dropGPUUse(now, dropWrongUser, e, rep.Node)
			continue
		case len(e.GPUs) == 0:
			c.dropGPUUse(now, dropNoGPUs, e, rep.Node)
			continue
		}
		j := u.jobs[e.JobID]
		if j == nil {
			j = &jobGPUUse{sum: ledger.JobGPUUse{JobID: e.JobID, User: e.UID}, nodeAt: map[string]int64{}, seen: live.pass}
			u.jobs[e.JobID] = j
		}
		if last, seen := j.nodeAt[rep.Node]; seen && at <= last {
			c.dropGPUUse(now, dropRepeat, e, rep.Node)
			continue
		}
		if _, seen := j.nodeAt[rep.Node]; seen || len(j.nodeAt) < maxNodesPerJob {
			j.nodeAt[rep.Node] = at
		}
		j.sum.Fold(sampleOf(e, at), u.idleBelow)
		j.rates.exact = c.exactRates
		j.rates.observe(e, rep.Node, at)
		j.mem = memSamplesOf(j.mem, e, rep.Node)
		// Saved with the next pass's flush: one transaction per pass,
		// however many nodes report in between.
		u.dirty[e.JobID] = j.sum
	}
	u.noteUnaccounted(rep, at)
}

// sampleOf sums up one entry: the mean utilisation of the job's GPUs whose
// utilisation the agent knew (unknown where it knew none's: not idle), the
// most memory on one of them, the most sharers.
func sampleOf(e *wire.JobUsage, at int64) ledger.JobGPUSample {
	s := ledger.JobGPUSample{At: at, GPUs: len(e.GPUs)}
	known := 0
	for _, g := range e.GPUs {
		if !g.UtilUnknown {
			s.UtilPct += g.UtilPct
			known++
		}
		s.MemPeakMB = max(s.MemPeakMB, g.MemUsedMB)
		s.Sharers = max(s.Sharers, g.Sharers)
	}
	if known > 0 {
		s.UtilPct /= float64(known)
	} else {
		s.UtilPct, s.UtilUnknown = 0, true
	}
	if p := e.Progress; p != nil {
		s.HasProgress, s.Iterations, s.ItersPerSec = true, p.Iterations, p.ItersPerSec
	}
	return s
}

// dropGPUUse counts a dropped entry and logs the drops at most once every
// dropLogEvery seconds. Caller holds mu.
func (c *Sharing) dropGPUUse(now int64, reason dropReason, e *wire.JobUsage, node string) {
	u := &c.use
	u.drops[reason]++
	c.met.usageDropped(dropReasons[reason])
	u.lastDrop = droppedEntry{job: e.JobID, uid: e.UID, node: node, reason: reason}
	if now-u.loggedAt < dropLogEvery {
		return
	}
	d := u.lastDrop
	args := []any{"last", fmt.Sprintf("job %d uid %d from node %s: %s", d.job, d.uid, strconv.Quote(d.node), dropReasons[d.reason])}
	for i, n := range u.drops {
		if n > 0 {
			args = append(args, dropReasons[i], n)
		}
	}
	c.log.Warn("dropped job-usage entries (counts by reason since the last line)", args...)
	u.drops = [len(dropReasons)]int{}
	u.loggedAt = now
}

// observe is the pass's observing step (Judge): which jobs run and who
// owns them (what ReportGPUUse checks entries against), which wait, the
// usage segment of each running job's AdminComment when its summary
// changed, and the idle rule. A job that has finished (or is gone) has its
// summary closed and handed to the writer; a requeued one keeps it for its
// next run. It decides nothing about sharing. Caller holds mu.
func (c *Sharing) observe(now int64, jobs []Job) {
	u := &c.use
	u.pass++
	u.idleBelow = c.cfg.GPUUse.IdleBelowPct
	after := int64(c.cfg.GPUUse.IdleAfter / time.Second)
	idle := 0
	for i := range jobs {
		s := &jobs[i]
		j := u.jobs[s.ID]
		if j != nil && s.State != Finished {
			j.seen = u.pass
		}
		if s.State == Pending {
			c.noteWaiting(s, s.Opportunistic || c.heldByItsExclusion(s))
		}
		if s.State != Running && s.State != Suspended {
			continue
		}
		prev := u.live[s.ID]
		l := liveJob{uid: s.User, pass: u.pass, running: s.State == Running, opportunistic: s.Opportunistic, model: prev.model,
			gpuShare: s.GPUShare, oneNode: s.OneNode, nodeGPUs: s.NodeGPUs}
		if l.model == "" && s.GPUShare && s.Run != nil {
			l.model = s.Run.ModelKey() // once per run: it copies a string out of slurmctld
		}
		if ex := c.intro.excl[s.ID]; ex != nil {
			ex.seen = u.pass
		}
		u.live[s.ID] = l
		if j == nil || j.sum.User != s.User {
			continue
		}
		if j.model == "" && s.Run != nil {
			j.model, j.oneGPU = s.Run.ModelKey(), s.OneGPU // once per job
		}
		if j.sum.Samples != j.shown && (j.shownAt == 0 || now-j.shownAt >= gpuUseShowEvery) {
			s.GPUUse = gpuUseSegment(&j.sum)
			j.shown, j.shownAt = j.sum.Samples, now
		}
		if j.sum.Idle(now, after) {
			idle++
			if !j.idle {
				j.idle = true
				c.log.Info("job holds its GPUs idle", keyJob, s.ID, keyUID, s.User, keyIdleFor, j.sum.IdleFor(now),
					keyIdleBelow, j.sum.IdleBelowPct, keyMeanUtil, round1(j.sum.MeanUtil()))
			}
		} else {
			j.idle = false
		}
	}
	for id, l := range u.live {
		if l.pass != u.pass {
			delete(u.live, id)
		}
	}
	for id, j := range u.jobs {
		if j.seen != u.pass {
			j.sum.Finished = max(now, 1)
			u.dirty[id] = j.sum
			c.noteFinishedUse(j)
			delete(u.jobs, id)
		}
	}
	c.met.idleJobs(idle)
}

// gpuUseSegment is the AdminComment text of a summary, e.g.
// "[GPU use: mean 37%, peak 80%, memory peak 9.1 GiB, 12.5 it/s, 8 samples]".
// Built with strconv, one allocation: the pass makes one per running job
// a minute, under slurmctld's job write lock.
func gpuUseSegment(u *ledger.JobGPUUse) string {
	var buf [2 * GPUUseMax]byte
	b := append(buf[:0], GPUUsePrefix+"mean "...)
	b = strconv.AppendFloat(b, u.MeanUtil(), 'f', 0, 64)
	b = append(b, "%, peak "...)
	b = strconv.AppendFloat(b, u.UtilPeak, 'f', 0, 64)
	b = append(b, "%, memory peak "...)
	b = strconv.AppendFloat(b, u.MemPeakMB/1024, 'f', 1, 64)
	b = append(b, " GiB"...)
	if u.ProgressSamples > 0 {
		b = append(b, ", "...)
		b = strconv.AppendFloat(b, u.ItersPerSecLast, 'g', 3, 64)
		b = append(b, " it/s"...)
	}
	if u.SharersMax > 1 {
		b = append(b, ", shared by up to "...)
		b = strconv.AppendInt(b, int64(u.SharersMax), 10)
		b = append(b, " jobs"...)
	}
	b = append(b, ", "...)
	b = strconv.AppendInt(b, u.Samples, 10)
	if u.Samples == 1 {
		b = append(b, " sample]"...)
	} else {
		b = append(b, " samples]"...)
	}
	if len(b) > GPUUseMax { // only an absurd memory figure gets here
		b = append(b[:GPUUseMax-1], ']')
	}
	return string(b)
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// flushGPUUse saves the summaries changed since the last flush; a failed
// save keeps them for the next one unless a newer copy came meanwhile.
// Writer goroutine only.
func (c *Sharing) flushGPUUse(store ledger.JobGPUUseStore) {
	u := &c.use
	c.mu.Lock()
	if len(u.dirty) == 0 {
		c.mu.Unlock()
		return
	}
	rows := make([]ledger.JobGPUUse, 0, len(u.dirty))
	for _, r := range u.dirty {
		rows = append(rows, r)
	}
	clear(u.dirty)
	c.mu.Unlock()
	if err := store.SaveJobGPUUse(rows); err != nil {
		c.log.Error("saving per-job GPU use failed; retrying with the next flush", keyErr, err, keyJobs, len(rows))
		c.mu.Lock()
		for _, r := range rows {
			if _, newer := u.dirty[r.JobID]; !newer {
				u.dirty[r.JobID] = r
			}
		}
		c.mu.Unlock()
	}
}

// restoreGPUUse takes back the summaries of jobs that were running when
// slurmctld stopped, so a restart continues them instead of overwriting
// their rows; a job that ended meanwhile is closed by the first pass.
func (c *Sharing) restoreGPUUse(store ledger.JobGPUUseLoader) error {
	rows, err := store.ActiveJobGPUUse()
	if err != nil {
		return err
	}
	u := &c.use
	c.mu.Lock()
	defer c.mu.Unlock()
	u.init()
	u.idleBelow = c.cfg.GPUUse.IdleBelowPct
	for _, r := range rows {
		u.jobs[r.JobID] = &jobGPUUse{sum: r, nodeAt: map[string]int64{}, seen: u.pass}
	}
	return nil
}

// JobGPUUse returns a job's summary as the core holds it (running jobs).
func (c *Sharing) JobGPUUse(id uint32) (ledger.JobGPUUse, bool) {
	u := &c.use
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := u.jobs[id]; j != nil {
		return j.sum, true
	}
	return ledger.JobGPUUse{}, false
}
