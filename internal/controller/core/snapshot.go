package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
	"github.com/lachesis-sched/lachesis/policy/gres"
)

// JobState is a job's state as the core needs to know it.
type JobState uint8

// These values are part of the C ABI (cgo/lachesis_core.h).
const (
	StatePending JobState = iota
	StateRunning
	StateSuspended
	StateFinished
)

// A pass hands its jobs' states to gpushare as they are: the values agree.
var (
	_ = [1]struct{}{}[gpushare.State(StatePending)-gpushare.Pending]
	_ = [1]struct{}{}[gpushare.State(StateRunning)-gpushare.Running]
	_ = [1]struct{}{}[gpushare.State(StateSuspended)-gpushare.Suspended]
	_ = [1]struct{}{}[gpushare.State(StateFinished)-gpushare.Finished]
)

// UnknownGPUs in Snapshot.GPUs means slurmctld does not track gres/gpu as a
// TRES, so the count comes from the job's gres request strings.
const UnknownGPUs = ^uint32(0)

// Snapshot is one job as copied out of slurmctld in a pass. Times are Unix
// seconds; zero means unset.
type Snapshot struct {
	ID    uint32
	State JobState
	// Held: a pending job that is held (priority 0) or whose priority an
	// admin set; tracked but neither ranked nor written back. A running
	// job is never held: its owner's hold must not shield it from
	// preemption (the plugin leaves its priority alone).
	Held bool
	// Deferred: a pending job, not held, that Slurm will not start yet:
	// its EligibleTime is unset (it waits on a dependency) or ahead
	// (--begin, the wait after a requeue). A job that has never run is
	// ranked last in its queue while deferred (priority.Job.Deferred).
	Deferred    bool
	GPUs        uint32
	GresRequest gres.Request // read only when GPUs == UnknownGPUs
	// GPUShare: the job asks for a share of one GPU on each of its nodes,
	// gres/shard or gres/mps (gres.AsksForGPUShare), and for no whole
	// GPU. Slurm 22.05 gives none of a GPU whole while any of its shards
	// or its MPS share is held, so such a job counts as one GPU per node
	// (gpuCount): it is charged, preempts and is preempted as a GPU job,
	// and an opportunistic job on a share is a first victim like one on a
	// whole GPU.
	GPUShare    bool
	Nice        int32
	SubmitTime  int64
	BeginTime   int64
	StartTime   int64
	EndTime     int64
	SuspendTime int64
	PreSusTime  int64
	PartFactor  float64
	QOSFactor   float64
	// CPUs is the job's allocated CPUs; NodeCPUs and NodeGPUs are the
	// shape of the first node of its allocation. Set for running,
	// suspended and finished jobs by the pass (0 = unknown); they price a
	// job without GPUs in GPU-equivalents (chargedGPUs).
	CPUs, NodeCPUs, NodeGPUs uint32
	// AdminComment is set only for pending jobs that Lachesis sized (their
	// admin comment carries SizedMarker) and that wait for resources
	// (WaitsForResources) or were requeued; SizingModel is then their
	// model key (job_submit/synergy's: the comment's model=..., else the
	// name), from which start-time sizing looks up the profile, and
	// CPUsPerTRES and MemPerTRES their CPUs and memory per GPU as Slurm
	// holds them, which a lowering is checked against (read by
	// policy/gres; the plugin compares them, never reads them).
	WaitsForResources bool
	AdminComment      string
	SizingModel       string
	CPUsPerTRES       string
	MemPerTRES        string
	// Marker is Lachesis's part of the job's SystemComment (restore.go),
	// "" when it has none.
	Marker string
	// Account is the job's Slurm account (interned: AccountNames), "" for
	// none; AccountShares is its association's shares, 0 when Slurm has
	// none to give (no slurmdbd, no association, shares not set).
	Account       string
	AccountShares uint32
	// User is the job's owner (uid); with Account and the GPU count it
	// keys the job's sweep (priority.Siblings).
	User uint32
	// Partition is the job's partition (interned, like Account; a pending
	// job submitted to several lists them comma-separated) and
	// PartitionTier its PriorityTier.
	Partition     string
	PartitionTier uint32
	// ArrayJobID is the job array the job is a task of, 0 for none.
	ArrayJobID uint32
	// ArrayThrottle, for the pending record of a job array's tasks that
	// wait only on the array's throttle (%N), is that throttle; 0 for
	// every other job.
	ArrayThrottle uint32
	// PreemptTime is when Slurm preempted the job's current run, 0 when
	// it was not. Slurm clears it once a requeue completes, so a pass sees
	// it only while the requeued job is still completing; Enqueue sees it at
	// the requeue itself.
	PreemptTime int64
	// RequeueAllowed: Slurm may requeue the job (--requeue, or
	// JobRequeue=1 without --no-requeue); a victim that may not be
	// requeued is killed.
	RequeueAllowed bool
	// FirstNode and NodeCount say where a running job runs: its first
	// node's index in Slurm's node table (ClusterNode.Index) and how many
	// nodes it has (0: not running). Quota reclaim in cells reads them.
	FirstNode int32
	NodeCount uint32
	// Nodes, for a running job on several nodes, are all NodeCount of
	// them (Slurm's node table indexes, FirstNode first); nil when the
	// plugin did not say. Like Run, valid only during the call that
	// received the snapshot (it may be the plugin's memory): the core
	// never keeps it.
	Nodes []int32
	// EndState says how a finished job ended; EndNone until it has.
	EndState EndState
	// Run, for a running, suspended or finished job, tells what its run
	// holds; nil when unknown. It is read only when a run opens under
	// effective service (once per run), so the caller need not copy
	// strings every pass, and it is valid only during the call that
	// received the snapshot: the core never keeps it.
	Run RunInfo
	// Asked, for a pending job, is its model key as job_submit/synergy
	// derives it (the comment's model=..., else the name), read only for
	// a waiting opportunistic job, once (gpushare/exclude.go); nil when unknown.
	// Valid only during the call that received the snapshot, like Run.
	Asked ModelKeyer
}

// ModelKeyer gives a job's model key (RunInfo.ModelKey's).
type ModelKeyer interface {
	ModelKey() string
}

// EndState is how a finished job ended, as Slurm's base job state says.
type EndState uint8

// The end states (cgo/lachesis_core.h LACHESIS_END_*).
const (
	EndNone      EndState = iota // not finished
	EndCompleted                 // ran to its end (COMPLETED)
	EndCancelled                 // scancel'ed (CANCELLED)
	EndFailed                    // failed, timed out, node failure, OOM, ...
)

// RunInfo is what the core asks of a run to weight its service
// (priority.Speeds): the GPU type it holds and the job's model.
type RunInfo interface {
	// GPUType is the type of the job's allocated GPUs as Slurm's typed
	// GRES names it ("" = untyped or unknown).
	GPUType() string
	// ModelKey is the job's model key, as job_submit/synergy derives it
	// (its comment's model=..., else its name).
	ModelKey() string
}
