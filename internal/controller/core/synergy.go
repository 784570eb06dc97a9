package core

import (
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/synergy"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

const keyModel = "model"

// SizeJob decides the CPUs and memory per GPU of a job being submitted
// (job_submit/synergy). It runs under slurmctld's read locks: memory only.
func (c *Core) SizeJob(req synergy.Request, nodes []synergy.Node) synergy.Decision {
	c.mu.Lock()
	cfg := c.cfg.Synergy
	c.mu.Unlock()
	d := synergy.Decide(cfg, req, nodes, c.lookupBestCase)
	c.met.sized(d.Action)
	if d.NoProfile && d.ModelKey != "" && c.agents != nil {
		c.agents.NoteModelKey(d.ModelKey) // memory only; written by a goroutine
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

// SizedMarker marks admin comments of jobs Lachesis sized (see synergy).
const SizedMarker = synergy.SizedMarker

// NodeState is one node's capacity and use, as the pass sees it.
type NodeState = synergy.NodeState

// Shrink asks the plugin to lower a pending job's request to what lets it
// start now (synergy.Fallback).
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

// noteCandidate records a pending snapshot as a fallback candidate: an
// enlarged job that has waited long enough and was not tried lately. Only
// then does the plugin take the locks and gather the nodes' state, so a
// job that merely waits its turn costs nothing. Caller holds mu.
func (c *Core) noteCandidate(now int64, s *Snapshot) {
	if !s.WaitsForResources || s.AdminComment == "" || !c.cfg.Synergy.Enabled {
		return
	}
	waitedSince := max(s.SubmitTime, s.BeginTime)
	if time.Duration(now-waitedSince)*time.Second < c.cfg.Synergy.FallbackAfter {
		return
	}
	if at, tried := c.shrinkTried[s.ID]; tried && now-at <= shrinkRetry {
		return
	}
	if sz, ok := synergy.ParseSizing(s.AdminComment); !ok || !sz.Enlarged() {
		return
	}
	c.candidates = append(c.candidates, fallbackCandidate{
		id: s.ID, comment: s.AdminComment, gpusPerNode: int(s.GresRequest.GPUsPerNode(uint64(s.gpuCount()))), waitedSince: waitedSince,
	})
}

// Fallback decides which candidates of the last pass to shrink, given the
// nodes' state, and forgets the candidates. At most max are returned.
func (c *Core) Fallback(now int64, nodes []NodeState, max int) []Shrink {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Shrink
	if c.shrinkTried == nil {
		c.shrinkTried = map[uint32]int64{}
	}
	for id, at := range c.shrinkTried { // forget old attempts
		if now-at > shrinkRetry {
			delete(c.shrinkTried, id)
		}
	}
	for _, cand := range c.candidates {
		if len(out) == max {
			break
		}
		if _, recent := c.shrinkTried[cand.id]; recent {
			continue
		}
		waited := time.Duration(now-cand.waitedSince) * time.Second
		sh, ok := synergy.Fallback(c.cfg.Synergy, cand.comment, cand.gpusPerNode, waited, nodes)
		if !ok {
			continue
		}
		c.shrinkTried[cand.id] = now
		out = append(out, Shrink{JobID: cand.id, CPUsPerGPU: sh.CPUsPerGPU, MemMBPerGPU: sh.MemMBPerGPU, AdminComment: sh.AdminComment})
		c.log.Info("lowering a waiting job's request to what lets it start now", keyJob, cand.id, keyCPUs, sh.CPUsPerGPU, keyMemMB, sh.MemMBPerGPU)
	}
	c.candidates = c.candidates[:0]
	return out
}

// shrinkRetry is how long (seconds) before a job whose shrink was asked
// for may be asked again: an update Slurm refused must not be retried on
// every pass.
const shrinkRetry = 60

const (
	keyCPUs  = "cpus_per_gpu"
	keyMemMB = "mem_mb_per_gpu"
)
