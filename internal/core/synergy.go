package core

import (
	"time"

	"github.com/lachesis-sched/lachesis/internal/gres"
	"github.com/lachesis-sched/lachesis/internal/synergy"
	"github.com/lachesis-sched/lachesis/profiler/sensitivity"
)

const keyModel = "model"

// SizeJob decides the CPUs and memory per GPU of a job being submitted
// (job_submit/synergy). It runs under slurmctld's read locks: memory only.
func (c *Core) SizeJob(req synergy.Request, nodes []synergy.Node) synergy.Decision {
	c.mu.Lock()
	cfg := c.cfg.Synergy
	c.mu.Unlock()
	d := synergy.Decide(cfg, req, nodes, c.lookupBestCase)
	if d.Action == synergy.Set && !d.Profiled && d.ModelKey != "" {
		c.noteUnprofiled(d.ModelKey)
	}
	if d.Action == synergy.Reject {
		c.log.Info("job refused at submit", keyModel, d.ModelKey, keyErr, d.Error)
	}
	return d
}

func (c *Core) lookupBestCase(model string) (sensitivity.Demand, bool) {
	if c.bestCase == nil {
		return sensitivity.Demand{}, false
	}
	return c.bestCase(model)
}

// noteUnprofiled remembers a model key that had no profile; the writer
// goroutine persists the counts.
func (c *Core) noteUnprofiled(key string) {
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	if c.seenKeys == nil {
		c.seenKeys = map[string]int{}
	}
	c.seenKeys[key]++
}

// takeUnprofiled hands the counts gathered since the last call to the
// writer.
func (c *Core) takeUnprofiled() map[string]int {
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	k := c.seenKeys
	c.seenKeys = nil
	return k
}

// SizedMarker marks admin comments of jobs Lachesis sized (see synergy).
const SizedMarker = synergy.SizedMarker

// NodeState is one node's capacity and use, as the pass sees it.
type NodeState = synergy.NodeState

// Shrink asks the plugin to resize a pending job to its proportional share.
type Shrink struct {
	JobID        uint32
	CPUsPerGPU   int
	MemMBPerGPU  uint64
	AdminComment string
}

// fallbackCandidate is a pending job Lachesis enlarged that waits for
// resources; whether it gets shrunk depends on the nodes (Fallback).
type fallbackCandidate struct {
	id          uint32
	comment     string
	gpusPerNode int
	waitedSince int64
}

// noteCandidate records a pending snapshot as a fallback candidate. Caller
// holds mu.
func (c *Core) noteCandidate(s *Snapshot) {
	if !s.WaitsForResources || s.AdminComment == "" || !c.cfg.Synergy.Enabled {
		return
	}
	c.candidates = append(c.candidates, fallbackCandidate{
		id: s.ID, comment: s.AdminComment, gpusPerNode: perNodeGPUs(s),
		waitedSince: max(s.SubmitTime, s.BeginTime),
	})
}

// Fallback decides which candidates of the last pass to shrink, given the
// nodes' state, and forgets the candidates. At most max are returned.
func (c *Core) Fallback(now int64, nodes []NodeState, max int) []Shrink {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Shrink
	for _, cand := range c.candidates {
		if len(out) == max {
			break
		}
		waited := time.Duration(now-cand.waitedSince) * time.Second
		sh, ok := synergy.Fallback(c.cfg.Synergy, cand.comment, cand.gpusPerNode, waited, nodes)
		if !ok {
			continue
		}
		out = append(out, Shrink{JobID: cand.id, CPUsPerGPU: sh.CPUsPerGPU, MemMBPerGPU: sh.MemMBPerGPU, AdminComment: sh.AdminComment})
		c.log.Info("shrinking a waiting job to its proportional share", keyJob, cand.id, keyCPUs, sh.CPUsPerGPU, keyMemMB, sh.MemMBPerGPU)
	}
	c.candidates = c.candidates[:0]
	return out
}

const (
	keyCPUs  = "cpus_per_gpu"
	keyMemMB = "mem_mb_per_gpu"
)

// perNodeGPUs is the job's GPU count on each of its nodes.
func perNodeGPUs(s *Snapshot) int {
	if n, err := gres.GPUs(s.GresRequest.PerNode); err == nil && n > 0 {
		return int(n)
	}
	total := int(s.gpuCount())
	nodes := max(int(s.GresRequest.Nodes), 1)
	return (total + nodes - 1) / nodes
}
