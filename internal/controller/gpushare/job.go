package gpushare

// State is a job's state as sharing needs to know it.
type State uint8

// The states of a job in a pass.
const (
	Pending State = iota
	Running
	Suspended
	Finished
)

// ModelKeyer gives a job's model key, as job_submit/synergy derives it
// (the comment's model=..., else the name). Reading one may copy a string
// out of slurmctld, so sharing reads it once per job or run.
type ModelKeyer interface {
	ModelKey() string
}

// MaxKeptOff is the most nodes Job.KeepOff may name (a longer set is not
// kept off at all): one job's ExcNodeList stays short.
const MaxKeptOff = maxExcludedNodes

// Job is one job of the pass as sharing reads it: the core copies it from
// the job's snapshot and its ranking, and Judge fills in the answers
// (GPUUse, Reason).
type Job struct {
	ID    uint32
	User  uint32 // its owner (uid)
	State State
	// Held: a pending job Slurm holds (priority 0), not ranked.
	Held bool
	// Partition: the job's partition list (sharing.opportunistic_partition
	// decides a held job's class).
	Partition string
	// Opportunistic: the pass ranked it in the opportunistic class.
	Opportunistic bool
	// Blocked: the pass shows another reason for it already (a refused
	// preemption), which a guest's reason does not replace.
	Blocked bool
	// WaitingSince: for a ranked pending job, since when it waits (its
	// upgrade to guaranteed is promote_after later).
	WaitingSince int64
	// GPUShare: it holds a share of one GPU (shards or MPS), not whole
	// GPUs. OneNode: it asks for one node, whose GPUs NodeGPUs counts
	// (running jobs). OneGPU: it holds one GPU, or a share of one
	// (running jobs).
	GPUShare, OneNode, OneGPU bool
	NodeGPUs                  uint32
	// Run (a running or suspended job) and Asked (a pending one) give its
	// model key; nil when unknown. Valid only during Judge.
	Run, Asked ModelKeyer
	// KeepOff, for a pending job, is the nodes the core keeps it off for
	// a reason of its own (node → why: a borrower kept off other accounts'
	// idle quota cells, core/quotaplace.go). They join the nodes sharing
	// keeps it off, through the same ExcNodeList edits (exclude.go); nil
	// lifts them. Read only during Judge.
	KeepOff map[string]string

	// GPUUse, set by Judge for a running job whose GPU-use summary
	// changed, is its new AdminComment segment (starting with
	// GPUUsePrefix).
	GPUUse string
	// Reason, set by Judge for a waiting guest, is the reason Slurm shows
	// for it (starting with reasontext.WaitingPrefix).
	Reason string
}
