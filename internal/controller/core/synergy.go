package core

import (
	"errors"
	"fmt"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
	"github.com/lachesis-sched/lachesis/policy/gres"
	"github.com/lachesis-sched/lachesis/policy/synergy"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

const keyModel = "model"

// SizeJob decides the CPUs and memory per GPU of a job being submitted
// (job_submit/synergy), or its shards of one GPU instead of a whole one.
// It runs under slurmctld's read locks: memory only.
func (c *Core) SizeJob(req synergy.Request, nodes []synergy.Node) synergy.Decision {
	c.mu.Lock()
	cfg, sharing := c.cfg.Synergy, c.cfg.Sharing
	c.mu.Unlock()
	// A guaranteed job's own request for a share of a GPU, refused while
	// whole GPUs are rewritten into shards (gpushare/shardconvert.go).
	d, refused := gpushare.RefuseGuaranteedShare(sharing, req)
	if !refused {
		d = synergy.Decide(cfg, req, nodes, c.lookupBestCase)
		// Then, maybe, shards of one GPU instead of it.
		d = c.sharing.ConvertToShards(sharing, req, nodes, d)
	}
	c.met.sized(d.Action)
	if d.NoProfile && d.ModelKey != "" && c.agents != nil {
		c.agents.NoteModelKey(d.ModelKey) // memory only; written by a goroutine
	}
	if d.Action == synergy.Reject {
		c.log.Info("job refused at submit", keyModel, d.ModelKey, keyErr, d.Error)
	}
	return d
}

func (c *Core) lookupBestCase(model string, uid uint32) (sensitivity.Demand, bool) {
	if c.bestCase == nil {
		return sensitivity.Demand{}, false
	}
	return c.bestCase(model, uid)
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
	Raise        bool // raised from the profile (synergy.Restore), not lowered
	// CPUsPerTRES and MemPerTRES are the job's request strings as the pass
	// saw them and the shrink was judged against: the plugin resizes only
	// a job whose strings are still these.
	CPUsPerTRES, MemPerTRES string
}

// ShrinkTRESMax bounds, NUL included, the request strings a Shrink
// carries back to the plugin (LACHESIS_SHRINK_TRES_MAX): a job whose
// strings are longer is not resized.
const ShrinkTRESMax = 64

// startSizing is what start-time sizing keeps between passes.
type startSizing struct {
	// candidates of the last pass (Fallback forgets them).
	candidates []fallbackCandidate
	// shrinkTried: when each job's shrink was last asked for.
	shrinkTried map[uint32]int64
	// raiseTried: when start-time sizing last raised each job, kept apart
	// from shrinkTried so a lowering does not delay the raise of the same
	// job once it is requeued.
	raiseTried map[uint32]int64
	// held: since when each waiting job has been held back by its sizing
	// (synergy.Fallback's clock), and when a pass last saw it waiting.
	// Memory only: after a restart a held job waits fallback_after again.
	held map[uint32]heldClock
}

// heldClock is one job's entry in startSizing.held.
type heldClock struct{ since, seen int64 }

// fallbackCandidate is a pending job Lachesis sized that start-time
// sizing may resize, depending on the nodes (Fallback): lower, when it
// waits for resources with a request above its share; raise, when its
// model's profile asks for more than its request (best is that profile).
type fallbackCandidate struct {
	id           uint32
	comment      string
	gpusPerNode  int
	sizing       synergy.Sizing
	lower, raise bool
	best         sensitivity.Demand
	// the job's cpus_per_tres and mem_per_tres as the pass saw them
	cpusPerTRES, memPerTRES string
}

// noteCandidate records a pending snapshot as a candidate for start-time
// sizing, if it was not tried lately: an enlarged job that waits for
// resources may be held back and then lowered; a job whose request is below its
// profile's best case (lowered for an earlier run or for a node another
// job took) may be raised. Only then does the plugin take the locks and
// gather the nodes' state, so a job that merely waits its turn costs
// nothing. Memory only (the profile cache). Caller holds mu.
func (c *Core) noteCandidate(now int64, s *Snapshot) {
	if s.AdminComment == "" || !c.cfg.Synergy.Enabled {
		return
	}
	sz, ok := synergy.ParseSizing(s.AdminComment)
	if !ok {
		return
	}
	cand := fallbackCandidate{id: s.ID, comment: s.AdminComment, sizing: sz,
		cpusPerTRES: s.CPUsPerTRES, memPerTRES: s.MemPerTRES}
	cand.lower = s.WaitsForResources && sz.Enlarged() && !triedLately(c.sizing.shrinkTried, s.ID, now)
	if s.SizingModel != "" && !triedLately(c.sizing.raiseTried, s.ID, now) {
		if best, ok := c.lookupBestCase(s.SizingModel, s.User); ok && best.Check() == nil &&
			(best.CPUsPerGPU > sz.CPUs || best.MemMB() > sz.MemMB) {
			cand.raise, cand.best = true, best
		}
	}
	if !cand.lower && !cand.raise {
		return
	}
	cand.gpusPerNode = int(s.GresRequest.GPUsPerNode(uint64(s.gpuCount())))
	c.sizing.candidates = append(c.sizing.candidates, cand)
}

// Fallback decides which candidates of the last pass to shrink, given the
// nodes' state, and forgets the candidates. At most max are returned.
func (c *Core) Fallback(now int64, nodes []NodeState, max int) []Shrink {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Shrink
	if c.sizing.shrinkTried == nil {
		c.sizing.shrinkTried, c.sizing.raiseTried = map[uint32]int64{}, map[uint32]int64{}
		c.sizing.held = map[uint32]heldClock{}
	}
	for id, h := range c.sizing.held { // jobs no longer waiting: started, gone
		if now-h.seen > shrinkRetry {
			delete(c.sizing.held, id)
		}
	}
	for _, tried := range []map[uint32]int64{c.sizing.shrinkTried, c.sizing.raiseTried} {
		for id, at := range tried { // forget old attempts
			if now-at > shrinkRetry {
				delete(tried, id)
			}
		}
	}
	for _, cand := range c.sizing.candidates {
		if len(out) == max {
			break
		}
		var sh synergy.Shrink
		ok := false
		if cand.raise && !triedLately(c.sizing.raiseTried, cand.id, now) {
			sh, ok = synergy.Restore(c.cfg.Synergy, cand.comment, cand.best, cand.sizing, cand.gpusPerNode, nodes)
		}
		if !ok && cand.lower && !triedLately(c.sizing.shrinkTried, cand.id, now) {
			clock, known := c.sizing.held[cand.id]
			if !known {
				clock.since = now
			}
			var holding bool
			sh, holding, ok = synergy.Fallback(c.cfg.Synergy, cand.comment, cand.gpusPerNode,
				time.Duration(now-clock.since)*time.Second, nodes)
			if holding || known { // the clock starts when the job is first held back
				clock.seen = now
				c.sizing.held[cand.id] = clock
			}
			if holding && !known && !ok {
				c.log.Info("holding a waiting job back for its request: a node has its GPUs free, none its CPUs and memory",
					keyJob, cand.id, keyCPUs, cand.sizing.CPUs, keyMemMB, cand.sizing.MemMB, "fallback_after", c.cfg.Synergy.FallbackAfter)
			}
		}
		if !ok {
			continue
		}
		if sh.Raise {
			c.sizing.raiseTried[cand.id] = now
		} else {
			c.sizing.shrinkTried[cand.id] = now
		}
		if err := resizeAllowed(cand, sh); err != nil {
			c.log.Error("start-time sizing refused", keyJob, cand.id, keyCPUs, sh.CPUsPerGPU, keyMemMB, sh.MemMBPerGPU, keyErr, err)
			continue
		}
		out = append(out, Shrink{JobID: cand.id, CPUsPerGPU: sh.CPUsPerGPU, MemMBPerGPU: sh.MemMBPerGPU, AdminComment: sh.AdminComment, Raise: sh.Raise,
			CPUsPerTRES: cand.cpusPerTRES, MemPerTRES: cand.memPerTRES})
		if sh.Raise {
			c.log.Info("raising a pending job's request toward its best case", keyJob, cand.id, keyCPUs, sh.CPUsPerGPU, keyMemMB, sh.MemMBPerGPU)
		} else {
			c.log.Info("lowering a waiting job's request to what lets it start now", keyJob, cand.id, keyCPUs, sh.CPUsPerGPU, keyMemMB, sh.MemMBPerGPU)
		}
	}
	c.sizing.candidates = c.sizing.candidates[:0]
	return out
}

// errResize is a start-time resize the core will not ask for.
var errResize = errors.New("resize refused")

// resizeAllowed checks a resize against the job's request as the pass saw
// it: its strings must fit the shrink (ShrinkTRESMax), and a lowering,
// whose numbers come from the job's AdminComment, never raises either
// dimension of that request as policy/gres reads it (a raise's numbers
// come from the profile and the nodes alone: synergy.Restore).
func resizeAllowed(cand fallbackCandidate, sh synergy.Shrink) error {
	if len(cand.cpusPerTRES) >= ShrinkTRESMax || len(cand.memPerTRES) >= ShrinkTRESMax {
		return fmt.Errorf("%w: the job's CpusPerTres or MemPerTres is longer than %d bytes, not Lachesis's sizing", errResize, ShrinkTRESMax-1)
	}
	if sh.Raise {
		return nil
	}
	cpus, okC, errC := gres.CPUsPerGPU(cand.cpusPerTRES)
	mem, okM, errM := gres.MemMBPerGPU(cand.memPerTRES)
	switch {
	case errC != nil || errM != nil:
		return fmt.Errorf("%w: a lowering needs the job's request per GPU: %w", errResize, errors.Join(errC, errM))
	case !okC || !okM:
		return fmt.Errorf("%w: a lowering needs the job's CPUs and memory per GPU (CpusPerTres=%q MemPerTres=%q)", errResize, cand.cpusPerTRES, cand.memPerTRES)
	case uint64(sh.CPUsPerGPU) > cpus || sh.MemMBPerGPU > mem:
		return fmt.Errorf("%w: a lowering never raises a job's request (CpusPerTres=%q MemPerTres=%q)", errResize, cand.cpusPerTRES, cand.memPerTRES)
	}
	return nil
}

// triedLately reports whether tried holds an attempt on job id within
// shrinkRetry of now.
func triedLately(tried map[uint32]int64, id uint32, now int64) bool {
	at, ok := tried[id]
	return ok && now-at <= shrinkRetry
}

// shrinkRetry is how long (seconds) before a job whose shrink was asked
// for may be asked again: an update Slurm refused must not be retried on
// every pass.
const shrinkRetry = 60

const (
	keyCPUs  = "cpus_per_gpu"
	keyMemMB = "mem_mb_per_gpu"
)
