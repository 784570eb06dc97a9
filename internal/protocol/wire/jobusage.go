package wire

import (
	"fmt"
	"math"
	"time"
)

// JobUsageReport is what the Slurm jobs of one node did with their GPUs
// over one sampling interval (frame type TypeJobUsage). The node agent
// measures it: NVML's per-process counters, each process mapped to its job
// through the job_<id> cgroup Slurm put it in, and the iterations a job's
// own training loop reported, if it opted in. Usage is never taken from a
// user: a job's processes can say how far they got (Progress), but only
// the agent, as root, says which job and GPU they belong to.
type JobUsageReport struct {
	Node string    `codec:"node"`
	At   time.Time `codec:"at"`
	// IntervalSec is the span the utilisation figures average over.
	IntervalSec float64    `codec:"interval_s"`
	Jobs        []JobUsage `codec:"jobs"`
	// Unaccounted is GPU use no job accounts for, per GPU and uid (at
	// most MaxUnaccounted entries). A controller older than the field
	// skips the key.
	Unaccounted []UnaccountedGPUUse `codec:"unaccounted,omitempty"`
}

// UnaccountedGPUUse is the use of one GPU by the processes of one uid
// that the agent found in no job: on a node without job cgroups, a
// process that left its step's process tree (setsid, daemonised), or one
// under another uid than its job's. The uid is the kernel's (a process
// cannot change its real uid); the controller charges the use to that
// user's opportunistic jobs on the GPU (gpushare/memguard.go).
type UnaccountedGPUUse struct {
	Index int    `codec:"index"`
	UUID  string `codec:"uuid"`
	UID   uint32 `codec:"uid"`
	// UtilPct (0..100) and MemUsedMB are the processes' together;
	// MemTotalMB the GPU's memory (0: unknown).
	UtilPct    float64 `codec:"util_pct"`
	MemUsedMB  float64 `codec:"mem_used_mb"`
	MemTotalMB float64 `codec:"mem_total_mb,omitempty"`
	Processes  int     `codec:"procs"`
}

// JobUsage is one job's use of the node's GPUs.
type JobUsage struct {
	JobID uint32 `codec:"job"`
	// UID owns the job's measured processes (from the kernel, not the
	// job); the controller compares it with Slurm's record of the job.
	UID  uint32        `codec:"uid"`
	GPUs []JobGPUUsage `codec:"gpus"`
	// Progress is nil when the job reported none.
	Progress *JobProgress `codec:"progress,omitempty"`
}

// JobGPUUsage is one job's share of one GPU.
type JobGPUUsage struct {
	Index int    `codec:"index"`
	UUID  string `codec:"uuid"`
	// UtilPct: percent of the GPU's time the job's kernels ran (NVML's
	// per-process SM utilisation), 0..100.
	UtilPct float64 `codec:"util_pct"`
	// UtilUnknown: none of the job's processes on the GPU had a
	// utilisation sample (no per-process counters, or the driver left
	// them out while the GPU was busy): UtilPct is 0 and means nothing,
	// not idle. A controller older than the field reads 0.
	UtilUnknown bool `codec:"util_unknown,omitempty"`
	// MemUsedMB: GPU memory the job's processes hold, MiB.
	MemUsedMB float64 `codec:"mem_used_mb"`
	// MemTotalMB: the GPU's memory, MiB; what the controller's memory
	// bound for opportunistic jobs is a share of (sharing.MemoryOver).
	// 0 when unknown: agents older than the field leave it out (the
	// controller then bounds nothing by memory), and a controller older
	// than it skips the key.
	MemTotalMB float64 `codec:"mem_total_mb,omitempty"`
	// Sharers counts the jobs with processes on this GPU, this one
	// included (1: the job had it alone).
	Sharers int `codec:"sharers"`
}

// JobProgress is what a job's training loop said about itself: a running
// count of iterations (mini-batches), and the rate the agent derived from
// successive counts.
//
// What the agent promises of ItersPerSec: a moving average of the
// intervals between the loop's accepted counts, each weighted by its
// length, with time constant ProgressTau (node-agent/jobprogress); At is
// the last count's time. So a change of the job's speed at t0 weighs
// 1 - e^-((At-t0)/ProgressTau) in the rate, and what the controller reads
// from a rate depends on that: introspection counts a job's rate in a
// window of sharers only once the rate before the window has faded
// (gpushare's IntroSettle).
type JobProgress struct {
	Iterations  uint64    `codec:"iters"`
	ItersPerSec float64   `codec:"iters_per_s"`
	At          time.Time `codec:"at"`
}

// ProgressTau is the time constant of the agent's moving average of a
// job's rate (JobProgress.ItersPerSec). One value for agent and
// controller: the agent smooths with it, the controller waits on it.
// 30 s: mini-batch times are noisy (data loading stalls, a logging step,
// garbage collection), so one interval says little; 30 s smooths those
// over yet follows a real change within a couple of minutes, inside the
// scheduler's decisions, which run on passes of minutes.
const ProgressTau = 30 * time.Second

// Limits on a usage report.
const (
	// MaxUsageJobs bounds the jobs of one report: more jobs than a node
	// has CPUs is already implausible.
	MaxUsageJobs = 4096
	// MaxItersPerSec bounds a reported rate (a million mini-batches a
	// second is no training loop).
	MaxItersPerSec = 1e6
	// MaxGPUMemMB bounds a GPU's memory and a job's use of it, MiB: 16
	// TiB, a hundred times today's largest GPU.
	MaxGPUMemMB = 16 << 20
	// MaxUnaccounted bounds a report's unaccounted entries (one per GPU
	// and uid).
	MaxUnaccounted = 1024
)

// Validate rejects a usage report that names no node, too many jobs or
// GPUs, or numbers no measurement can give.
func (r *JobUsageReport) Validate() error {
	if err := checkName("node", r.Node, MaxNameLen); err != nil {
		return err
	}
	if len(r.Jobs) > MaxUsageJobs {
		return fmt.Errorf("%w: %d jobs, limit %d", ErrBody, len(r.Jobs), MaxUsageJobs)
	}
	if bad(r.IntervalSec) || r.IntervalSec < 0 || r.IntervalSec > 86400 {
		return fmt.Errorf("%w: interval %v s outside 0..86400", ErrBody, r.IntervalSec)
	}
	gpus := 0
	for i := range r.Jobs {
		j := &r.Jobs[i]
		if j.JobID == 0 {
			return fmt.Errorf("%w: job id 0", ErrBody)
		}
		gpus += len(j.GPUs)
		if gpus > MaxGPUs {
			return fmt.Errorf("%w: more than %d job GPUs", ErrBody, MaxGPUs)
		}
		for _, g := range j.GPUs {
			if g.Index < 0 || g.Index >= MaxGPUs || len(g.UUID) > MaxNameLen {
				return fmt.Errorf("%w: job %d: GPU index %d or uuid of %d bytes", ErrBody, j.JobID, g.Index, len(g.UUID))
			}
			if bad(g.UtilPct) || g.UtilPct < 0 || g.UtilPct > 100 || !(g.MemUsedMB >= 0 && g.MemUsedMB <= MaxGPUMemMB) ||
				!(g.MemTotalMB >= 0 && g.MemTotalMB <= MaxGPUMemMB) {
				return fmt.Errorf("%w: job %d GPU %d: utilisation %v%%, memory %v MB or GPU memory %v MB", ErrBody, j.JobID, g.Index,
					g.UtilPct, g.MemUsedMB, g.MemTotalMB)
			}
			if g.Sharers < 1 || g.Sharers > MaxUsageJobs {
				return fmt.Errorf("%w: job %d GPU %d: %d sharers", ErrBody, j.JobID, g.Index, g.Sharers)
			}
		}
		if p := j.Progress; p != nil && (bad(p.ItersPerSec) || p.ItersPerSec < 0 || p.ItersPerSec > MaxItersPerSec) {
			return fmt.Errorf("%w: job %d: %v iterations/s", ErrBody, j.JobID, p.ItersPerSec)
		}
	}
	if len(r.Unaccounted) > MaxUnaccounted {
		return fmt.Errorf("%w: %d unaccounted entries, limit %d", ErrBody, len(r.Unaccounted), MaxUnaccounted)
	}
	for _, g := range r.Unaccounted {
		if g.Index < 0 || g.Index >= MaxGPUs || len(g.UUID) > MaxNameLen || g.Processes < 1 || g.Processes > MaxUsageJobs*64 {
			return fmt.Errorf("%w: unaccounted use: GPU index %d, uuid of %d bytes or %d processes", ErrBody, g.Index, len(g.UUID), g.Processes)
		}
		if bad(g.UtilPct) || g.UtilPct < 0 || g.UtilPct > 100 || !(g.MemUsedMB >= 0 && g.MemUsedMB <= MaxGPUMemMB) ||
			!(g.MemTotalMB >= 0 && g.MemTotalMB <= MaxGPUMemMB) {
			return fmt.Errorf("%w: unaccounted use of GPU %d: utilisation %v%%, memory %v MB or GPU memory %v MB", ErrBody, g.Index,
				g.UtilPct, g.MemUsedMB, g.MemTotalMB)
		}
	}
	return nil
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
