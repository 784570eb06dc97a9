package sim

import (
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// Status is where a job is in its life.
type Status uint8

const (
	// NotArrived: before its submit time.
	NotArrived Status = iota
	Pending
	Running
	Done
)

// JobState is one job during a simulation. Policies read it; only the
// engine changes it, except Account's queue and promotion fields, which the
// Tiresias orderer folds its results into, as Lachesis's core does.
type JobState struct {
	Job    Job
	Status Status
	// Model is the model the job was given (see ModelRule); Profile is nil
	// for an unprofiled job.
	Model   string
	Profile *sensitivity.Profile
	best    sensitivity.Demand
	// inSweep: the job has joined its sweep (tiresiasOrder), which it does
	// once, not at every pass.
	inSweep bool

	// Remaining is the work left, in seconds at speed 1 (the proportional
	// share), as of RunStart while running and as of now while pending.
	Remaining float64
	// Speed is the current run's speed: throughput relative to the
	// proportional share, from the job's profile and allocation.
	Speed float64
	// RunStart is when the current run began; progress starts at
	// ProgressFrom, later by the restart penalty after a preemption.
	RunStart     float64
	ProgressFrom float64

	// Account is the job's Tiresias accounting, kept by the same code as
	// in slurmctld (priority.Account): service of closed runs, the open
	// run, queue, promotion state. The engine opens and closes runs; the
	// orderer applies each pass's results.
	Account priority.Account

	FirstStart  float64
	Finish      float64
	Preemptions int
	Starts      int

	slots []slot
	// seq numbers the job's runs, so a completion event of a run that was
	// preempted is recognised as stale.
	seq uint32
	// pos is the job's place in the current pass's order.
	pos int32
	// sortKey is scratch for orderers that sort by a computed value.
	sortKey float64
	// preemptedIn is the pass in which the job was last preempted.
	preemptedIn uint32
	// het is the job's heterogeneous data, nil on a homogeneous cluster.
	het *hetJob
	// eligibleAt is when a requeued job may start again (Slurm's requeue
	// hold); listPos is its place in its queue's list under reference
	// preemption.
	eligibleAt float64
	// held: start-time sizing holds the job back, waiting for a node that
	// holds its request, since heldSince (AllocStart).
	held      bool
	heldSince float64
	listPos   int64
	// maxSpeed is the fastest run's speed; progressTime the time spent
	// making progress (running, past the restart penalty).
	maxSpeed     float64
	progressTime float64
	// charged is the service already in the account's fair-share usage;
	// heldGPUSeconds the GPU-seconds the job held (restart penalties
	// included), for the per-account report.
	charged        float64
	heldGPUSeconds float64
	// acct is the job's account's index in the engine's accountMeter.
	acct int32

	// entry is when the job joined the policy's queue: its submission, or
	// its promotion from opportunistic (FIFO and age order by it).
	entry float64

	// Sharing (sharing.go), with a SharingConfig: opp is set while the job
	// is opportunistic (not promoted); a guest runs on its host's GPU.
	opp         bool
	host, guest *JobState
	// coHosts: a guest on shares of several GPUs of one node
	// (SharingConfig.MultiGPUGuests), its hosts beyond host, one per GPU;
	// each has guest set to it.
	coHosts []*JobState
	// pairModel is the model its interference is looked up by, usage its
	// share of a GPU alone; shareFactor its speed relative to alone now,
	// soloSpeed a host's speed without its guest.
	pairModel   string
	usage       float64
	shareFactor float64
	soloSpeed   float64
	// waited is the time spent pending before pendingSince, the start of
	// the current wait; pairedAt when a guest's pair started, pairChecked
	// once the revert rule has measured it.
	waited, pendingSince float64
	pairedAt             float64
	pairChecked          bool
	// segFrom and allocFrom: where the report's accounting of the run
	// stopped last.
	segFrom, allocFrom float64
}

// slot is a job's share of one node.
type slot struct {
	node  int32
	gpus  int32
	cpus  int32
	memGB float64
}

// AttainedService is the job's GPU-seconds run so far, across requeues.
func (j *JobState) AttainedService(now float64) float64 {
	return j.Account.ServiceAt(j.accountSeconds(now))
}

// QueueService is the attained service since the last promotion, which
// places the job in a queue.
func (j *JobState) QueueService(now float64) float64 {
	return j.AttainedService(now) - j.Account.ServiceBase
}

// RemainingAt is the work left at now, in seconds at speed 1.
func (j *JobState) RemainingAt(now float64) float64 {
	if j.Status == Running && now > j.ProgressFrom {
		return max(0, j.Remaining-j.Speed*(now-j.ProgressFrom))
	}
	return j.Remaining
}
