package core

import (
	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
)

// A pass's fourth stage: GPU sharing and per-job GPU use (gpushare).

// judgeSharing is a pass's fourth stage: gpushare judges per-job GPU use and
// sharing from the pass's jobs as it ranked them, and the pass applies its
// answers (each job's GPU-use segment, each waiting guest's reason, the
// pair scores the next pass ranks by).
func (c *Core) judgeSharing(now int64, snaps []Snapshot, out []Decision) {
	jobs := c.sharingJobs[:0]
	for i := range snaps {
		s := &snaps[i]
		j := gpushare.Job{ID: s.ID, User: s.User, State: gpushare.State(s.State), Held: s.Held, Partition: s.Partition,
			Opportunistic: out[i].Opportunistic, Blocked: out[i].Blocked != "", GPUShare: s.GPUShare,
			OneNode: s.GresRequest.Nodes <= 1, NodeGPUs: s.NodeGPUs}
		if s.Run != nil && (s.State == StateRunning || s.State == StateSuspended) {
			j.Run, j.OneGPU = s.Run, s.gpuCount() == 1
		}
		if s.Asked != nil {
			j.Asked = s.Asked
		}
		if s.State == StatePending {
			j.KeepOff = c.keptOffFor(s.ID) // a borrower kept off owners' idle cells (quotaplace.go)
		}
		jobs = append(jobs, j)
	}
	for k := range c.jobs {
		jobs[c.jobIndex[k]].WaitingSince = c.jobs[k].WaitingSince
	}
	c.sharing.Judge(now, c.cfg, jobs, c.pairScores)
	for i := range jobs {
		if jobs[i].GPUUse != "" {
			out[i].GPUUse = jobs[i].GPUUse
		}
		if jobs[i].Reason != "" {
			out[i].Blocked = jobs[i].Reason
		}
	}
	clear(jobs) // no pointers into slurmctld kept past the pass
	c.sharingJobs = jobs
}
