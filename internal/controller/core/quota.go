package core

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/util/reasontext"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// Guaranteed quotas in the pass (issue 35; the rules are policy/quota and
// policy/priority/quota.go). Between fairShare and rank, classifyQuotas
// says of every GPU job whether it runs or would run within its account's
// quota (quota.Classify: running jobs first, then the waiting ones in
// Tiresias order) or borrows; the ranker lays the within-quota jobs above
// every borrower. After rank, reclaim takes GPUs back for waiting
// within-quota jobs: quota.Choose picks the borrowers of other accounts
// whose requeue loses the least work, at most quota.max_reclaim_per_pass
// of them per pass, never a job within its own account's quota, and
// gpushare's requeuer requeues them. Slurm's own preemption (Preemptable)
// never takes a borrower for an owner, so the bound holds.
//
// Quotas are counted in GPUs (KAI's deserved quota, the simulator's
// "quota" policy) for the class. The reclaim of an owner's job of up to a
// node's GPUs, once the plugin sent the node table and the quotas are
// bound to it (cluster.go), frees one node whole: every GPU node is a
// room, its free GPUs what the running jobs on it leave, so the job gets
// a cell rather than GPUs scattered over nodes; a job of several nodes
// frees its quota's nodes under one leaf switch (quotatopo.go); a pass
// before the node table, or an account without whole nodes in its quota,
// frees the job's size from borrowers anywhere. Slurm's
// placement itself does not keep cells whole (docs/configuration.md,
// "Quotas in cells"). Without a quota section nothing here runs and every
// job is QuotaOff.

const (
	keyQuotaGPUs = "quota_gpus"
	keyUsing     = "using_gpus"
	keyWorkLost  = "work_lost_gpu_s"
	keyCell      = "cell_node" // the node a reclaim frees whole ("" counted in GPUs)
	// reclaimHeldFor: a victim requeued this long ago that a pass still
	// sees running is not chosen again, and GPUs freed for an owner that
	// has not started this long after are no longer counted as its (the
	// requeue failed, or another job took them).
	reclaimHeldFor = 300
	// maxReclaimOwners bounds the owners one pass tries to reclaim for,
	// so that a flood of waiting within-quota jobs cannot make the pass
	// slow (quota.Choose is exhaustive on up to 12 borrowers).
	maxReclaimOwners = 64
)

// quotaState is what the core keeps of quotas between passes; under mu.
type quotaState struct {
	// using: GPUs each account ran within its quota at the last pass
	// (a new job's class at Enqueue is judged against it).
	using map[string]int
	// victims: borrowers requeued by a reclaim, with the reason shown
	// while they wait again.
	victims map[uint32]reclaimedVictim
	// freed: GPUs requeued for a waiting owner, and when.
	freed map[uint32]freedFor
	// blockedLogged: when a blocked reclaim of an owner was last logged,
	// and why.
	blockedLogged map[uint32]blockedReclaim
	// accounts: the per-account figures the metrics show (accounts with
	// a quota or running GPU jobs).
	accounts map[string]*accountQuota
	// place: borrowers kept off owners' idle cells, quota segments
	// (quotaplace.go).
	place quotaPlace
}

type reclaimedVictim struct {
	at     int64
	reason string
	// waited: a pass saw it pending since (the requeue happened), so
	// once it runs again it is an ordinary candidate.
	waited bool
}

type freedFor struct {
	gpus int
	at   int64
}

type blockedReclaim struct {
	at  int64
	why string
}

// accountQuota is one account's quota standing at the last pass.
type accountQuota struct {
	deserved, allocated, borrowed int // GPUs
	reclaimed                     int // jobs of others requeued for it, in all
}

// quotasOn says whether any account holds a quota.
func (c *Core) quotasOn() bool { return len(c.cfg.Quota.Accounts) > 0 }

// quotaGPUs is account's quota in GPUs (0 without one).
func (c *Core) quotaGPUs(account string) int {
	return c.cfg.Quota.Accounts[strings.ToLower(account)].GPUs()
}

// classifyQuotas sets each ranked GPU job's quota class. Caller holds mu.
func (c *Core) classifyQuotas(snaps []Snapshot) {
	if !c.quotasOn() {
		clear(c.quota.using)
		return
	}
	if c.quota.using == nil {
		c.quota.using = map[string]int{}
	}
	clear(c.quota.using)
	// Running jobs hold their GPUs first (oldest run first); then the
	// waiting ones in Tiresias's order (queue, queue entry, submission),
	// the deferred last since they cannot start yet.
	order := make([]int, 0, len(c.jobs))
	for k := range c.jobs {
		c.jobs[k].Quota = priority.QuotaOff
		if c.jobs[k].GPUs > 0 {
			order = append(order, k)
		}
	}
	rank := func(k int) (int, int64, int64) {
		j := &c.jobs[k]
		s := &snaps[c.jobIndex[k]]
		switch {
		case j.State == priority.Running:
			return 0, s.StartTime, 0
		case j.Deferred:
			return 2, int64(j.Queue), j.QueueEntry
		}
		return 1, int64(j.Queue), j.QueueEntry
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ga, xa, ya := rank(a)
		gb, xb, yb := rank(b)
		if d := cmp.Compare(ga, gb); d != 0 {
			return d
		}
		if d := cmp.Compare(xa, xb); d != 0 {
			return d
		}
		if d := cmp.Compare(ya, yb); d != 0 {
			return d
		}
		return cmp.Compare(c.jobs[a].ID, c.jobs[b].ID)
	})
	held := map[string]int{}
	for _, k := range order {
		j := &c.jobs[k]
		acct := strings.ToLower(snaps[c.jobIndex[k]].Account)
		g := int(j.GPUs)
		if quota.Within(c.quotaGPUs(acct), held[acct], g) {
			j.Quota = priority.QuotaWithin
			held[acct] += g
			if j.State == priority.Running {
				c.quota.using[acct] += g
			}
		} else {
			j.Quota = priority.QuotaBorrowing
		}
	}
}

// enqueueQuotaClass is the quota class of a job enqueued between passes:
// within when its account's running within-quota GPUs of the last pass
// leave room for it.
func (c *Core) enqueueQuotaClass(s *Snapshot) priority.QuotaClass {
	g := int(s.gpuCount())
	if !c.quotasOn() || g == 0 {
		return priority.QuotaOff
	}
	acct := strings.ToLower(s.Account)
	if quota.Within(c.quotaGPUs(acct), c.quota.using[acct], g) {
		return priority.QuotaWithin
	}
	return priority.QuotaBorrowing
}

// reclaim is the pass's quota reclaim, after rank (which it reads):
// for each waiting within-quota job Slurm found no resources for, best
// ranked first, the cheapest borrowers to requeue. Caller holds mu.
func (c *Core) reclaim(now int64, snaps []Snapshot, out []Decision) {
	if !c.quotasOn() {
		c.quota = quotaState{}
		return
	}
	if c.quota.victims == nil {
		c.quota.victims = map[uint32]reclaimedVictim{}
		c.quota.freed = map[uint32]freedFor{}
		c.quota.blockedLogged = map[uint32]blockedReclaim{}
	}
	c.tallyAccounts(snaps)
	pendingAt := c.pendingIndexes()
	var owners []int
	var cands []quota.Candidate
	candNodes := map[uint32][]int32{} // a candidate's nodes (Slurm's indexes); none: unknown
	// usedOn: GPUs of the running jobs on each node (a job on several
	// nodes spread evenly over them; its nodes unknown, its first full).
	usedOn := map[int32]int{}
	for k := range c.jobs {
		j := &c.jobs[k]
		s := &snaps[c.jobIndex[k]]
		switch {
		case j.GPUs == 0:
		case j.State == priority.Running:
			if v, ok := c.quota.victims[j.ID]; ok && !v.waited && now-v.at < reclaimHeldFor {
				continue // its requeue is under way: its GPUs count as free
			}
			delete(c.quota.victims, j.ID)
			nodes := runningNodes(s)
			chargeNodes(usedOn, s, nodes, int(j.GPUs))
			if !s.RequeueAllowed {
				continue // a requeue would be refused (--no-requeue)
			}
			ran := 0.0
			if rec := c.records[j.ID]; rec != nil && rec.RunOpen {
				ran = float64(max(0, now-rec.RunStart))
			}
			cands = append(cands, quota.Candidate{Job: j.ID, Account: strings.ToLower(s.Account), GPUsIn: int(j.GPUs),
				WorkLost: ran * float64(j.GPUs), Within: j.Quota == priority.QuotaWithin})
			if nodes != nil {
				candNodes[j.ID] = slices.Clone(nodes) // s.Nodes lives only as long as the call
			}
		case j.State == priority.Pending && j.Quota == priority.QuotaWithin && !j.Deferred &&
			!c.results[k].Opportunistic && s.WaitsForResources:
			owners = append(owners, k)
		}
	}
	for id, v := range c.quota.victims {
		if !c.seen[id] {
			delete(c.quota.victims, id)
			continue
		}
		if k, ok := pendingAt[id]; ok {
			out[c.jobIndex[k]].Blocked = v.reason
			v.waited = true
			c.quota.victims[id] = v
		}
	}
	slices.SortFunc(owners, func(a, b int) int { return cmp.Compare(c.results[a].Rank, c.results[b].Rank) })
	if len(owners) > maxReclaimOwners {
		owners = owners[:maxReclaimOwners]
	}
	cells := c.nodeRooms(cands, candNodes, usedOn)
	waiting := map[uint32]bool{}
	budget := c.cfg.Quota.MaxReclaimPerPass
	for _, k := range owners {
		j := &c.jobs[k]
		waiting[j.ID] = true
		if budget <= 0 {
			break
		}
		acct := strings.ToLower(snaps[c.jobIndex[k]].Account)
		f := c.quota.freed[j.ID]
		if now-f.at >= reclaimHeldFor {
			f = freedFor{}
		}
		req := quota.Request{Account: acct, GPUs: int(j.GPUs), MaxVictims: budget, Partial: true,
			Rooms:      []quota.Room{{GPUs: int(j.GPUs), Free: f.gpus}},
			Candidates: cands}
		inCell := cells != nil && int(j.GPUs) <= cells.nodeGPUs
		var nodes *cellRooms // an owner of several nodes: its quota's nodes under one switch
		switch {
		case inCell:
			req.Rooms, req.Candidates = cells.rooms, cells.cands
		case cells != nil:
			if nodes = c.switchRooms(acct, int(j.GPUs), cands, candNodes, usedOn); nodes != nil {
				req.Rooms, req.Candidates = nodes.rooms, nodes.cands
			}
		}
		plan, err := quota.Choose(req)
		if err != nil {
			c.blockedReclaim(now, j.ID, err, out[c.jobIndex[k]:][:1])
			continue
		}
		delete(c.quota.blockedLogged, j.ID)
		node, sw := "", ""
		switch {
		case inCell:
			// The node's GPUs are this owner's now: the next owner of
			// the pass does not count them free.
			r := &cells.rooms[plan.Room]
			r.Free = max(0, r.Free+plan.GPUsFreed-int(j.GPUs))
			node, sw = cells.names[plan.Room], cells.switches[plan.Room]
		case nodes != nil:
			node, sw = nodes.names[plan.Room], nodes.switches[plan.Room]
			nodes.claim(plan.Room, usedOn)
		}
		if len(plan.Victims) == 0 {
			continue
		}
		using := c.quota.using[acct]
		reason := fmt.Sprintf("%sreclaimed by account %s's job %d (quota %d GPUs, using %d)",
			reasontext.WaitingPrefix, acct, j.ID, c.quotaGPUs(acct), using)
		for _, v := range plan.Victims {
			if !c.sharing.RequeueForReclaim(v.Job) {
				c.log.Warn("requeue queue full; the next pass reclaims again", keyJob, v.Job)
				break
			}
			budget--
			f.gpus += v.GPUsIn
			f.at = now
			c.quota.victims[v.Job] = reclaimedVictim{at: now, reason: reason}
			cands = slices.DeleteFunc(cands, func(x quota.Candidate) bool { return x.Job == v.Job })
			if cells != nil {
				cells.cands = slices.DeleteFunc(cells.cands, func(x quota.Candidate) bool { return x.Job == v.Job })
			}
			if a := c.quota.accounts[acct]; a != nil {
				a.reclaimed++
			}
			c.met.quotaReclaim(acct)
			c.log.Info("quota reclaim", keyAccount, acct, keyPreemptor, j.ID, keyJob, v.Job, "victim_account", v.Account,
				keyQuotaGPUs, c.quotaGPUs(acct), keyUsing, using, keyWorkLost, v.WorkLost,
				keyReason, plan.Reason(acct, int(j.GPUs)), keyCell, node, keySwitch, sw)
		}
		c.quota.freed[j.ID] = f
	}
	c.placeBorrowers(snaps, out, usedOn)
	for id := range c.quota.freed {
		if _, pending := pendingAt[id]; !waiting[id] && !pending {
			delete(c.quota.freed, id)
		}
	}
	for id := range c.quota.blockedLogged {
		if _, pending := pendingAt[id]; !pending {
			delete(c.quota.blockedLogged, id)
		}
	}
}

// blockedReclaim shows why a within-quota job's reclaim cannot be made
// (its reason) and logs it once a minute while it stays so.
func (c *Core) blockedReclaim(now int64, id uint32, err error, out []Decision) {
	why := err.Error()
	if !errors.Is(err, quota.ErrBlocked) {
		why = "quota reclaim: " + why
	}
	out[0].Blocked = reasontext.WaitingPrefix + why
	if b, ok := c.quota.blockedLogged[id]; ok && b.why == why && now-b.at < blockedLogEvery {
		return
	}
	c.quota.blockedLogged[id] = blockedReclaim{at: now, why: why}
	c.log.Info("quota reclaim blocked", keyJob, id, keyReason, why)
}

// pendingIndexes maps the pending jobs the quota state names to their
// index in c.jobs (nil when it names none: the common pass).
func (c *Core) pendingIndexes() map[uint32]int {
	if len(c.quota.victims)+len(c.quota.freed)+len(c.quota.blockedLogged) == 0 {
		return nil
	}
	m := map[uint32]int{}
	for k := range c.jobs {
		id := c.jobs[k].ID
		if c.jobs[k].State != priority.Pending {
			continue
		}
		_, v := c.quota.victims[id]
		_, f := c.quota.freed[id]
		_, b := c.quota.blockedLogged[id]
		if v || f || b {
			m[id] = k
		}
	}
	return m
}

// tallyAccounts fills the per-account figures of the pass (metrics):
// each quota account's deserved GPUs, those its running jobs hold, and
// of those the GPUs beyond its quota (borrowed); an account without a
// quota that runs GPU jobs shows what it borrows.
func (c *Core) tallyAccounts(snaps []Snapshot) {
	if c.quota.accounts == nil {
		c.quota.accounts = map[string]*accountQuota{}
	}
	for _, a := range c.quota.accounts {
		a.allocated, a.borrowed = 0, 0
	}
	for acct, spec := range c.cfg.Quota.Accounts {
		a := c.quota.accounts[acct]
		if a == nil {
			a = &accountQuota{}
			c.quota.accounts[acct] = a
		}
		a.deserved = spec.GPUs()
	}
	for k := range c.jobs {
		j := &c.jobs[k]
		if j.GPUs == 0 || j.State != priority.Running {
			continue
		}
		acct := strings.ToLower(snaps[c.jobIndex[k]].Account)
		a := c.quota.accounts[acct]
		if a == nil {
			if len(c.quota.accounts) >= quota.MaxAccounts*2 {
				continue // bounded: accounts without quotas come and go
			}
			a = &accountQuota{}
			c.quota.accounts[acct] = a
		}
		a.allocated += int(j.GPUs)
		if j.Quota == priority.QuotaBorrowing {
			a.borrowed += int(j.GPUs)
		}
	}
	for name, a := range c.quota.accounts {
		if a.deserved == 0 && a.allocated == 0 {
			delete(c.quota.accounts, name)
		}
	}
	c.met.quotaAccounts(c.quota.accounts)
}

// cellRooms is a pass's reclaim rooms (a node's GPUs, or an owner's
// quota nodes under one switch) and the borrowers in them.
type cellRooms struct {
	rooms    []quota.Room
	names    []string // rooms[i]'s nodes, comma-separated
	switches []string // rooms[i]'s leaf switch
	nodeIdx  [][]int32
	cands    []quota.Candidate
	nodeGPUs int // the most GPUs of one node
}

// claim marks room r's nodes full for the rest of the pass: an owner
// of several nodes takes them whole.
func (cr *cellRooms) claim(r int, usedOn map[int32]int) {
	for _, n := range cr.nodeIdx[r] {
		usedOn[n] = maxNodeUse
	}
}

// nodeRooms makes every GPU node a room once the plugin sent the cluster
// and the quotas are bound to it (nil otherwise: reclaim counts GPUs over
// the whole cluster). A node's free GPUs are its GPUs less those of the
// running GPU jobs on it (usedOn; a victim whose requeue is under way is
// not counted, so its GPUs count as free). A borrower on several nodes
// is a candidate in each of its nodes' rooms, with its GPUs there; one
// whose nodes are unknown is none. Caller holds mu.
func (c *Core) nodeRooms(cands []quota.Candidate, candNodes map[uint32][]int32, usedOn map[int32]int) *cellRooms {
	b := c.cluster.binding
	if b == nil {
		return nil
	}
	cr := &cellRooms{}
	roomOf := make(map[int32]int, len(b.nodes))
	for ti, n := range b.nodes {
		roomOf[n.Index] = len(cr.rooms)
		cr.rooms = append(cr.rooms, quota.Room{ID: int(n.Index), GPUs: n.GPUs, Free: max(0, n.GPUs-usedOn[n.Index])})
		cr.names = append(cr.names, n.Name)
		cr.switches = append(cr.switches, b.switches[b.tree.Cell(b.tree.NodeCell(ti)).Switch])
		cr.nodeIdx = append(cr.nodeIdx, []int32{n.Index})
		cr.nodeGPUs = max(cr.nodeGPUs, n.GPUs)
	}
	for _, cand := range cands {
		nodes := candNodes[cand.Job]
		total := cand.GPUsIn
		for k, n := range nodes {
			if r, ok := roomOf[n]; ok {
				cand.Room, cand.GPUsIn = r, gpusOn(total, len(nodes), k)
				cr.cands = append(cr.cands, cand)
			}
		}
	}
	return cr
}
