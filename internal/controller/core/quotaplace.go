package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/controller/gpushare"
	"github.com/lachesis-sched/lachesis/policy/cells"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/quota"
)

// Borrowers kept off owners' idle cells, the Slurm way (issue 35, item
// 2; HiveD: a borrower takes unbound cells first, then other accounts'
// idle ones). Slurm places a job by its own choice of nodes, which knows
// nothing of quotas: a borrower lands on an owner's idle node while
// unbound nodes are free, and the owner later pays a reclaim. After the
// reclaim, each pass walks the waiting borrowers in rank order and places
// each one virtually on the nodes' free GPUs (what the running jobs
// leave, the earlier borrowers of the pass taken off): when it fits on
// nodes that hold no wholly free cell of another account's quota, it is
// kept off the nodes that do (Job.KeepOff: gpushare's ExcNodeList edits,
// rate limits and restart state, beside the user's own list, which comes
// back as it was when the steering is lifted); when it fits only there,
// it is not kept off anything: it borrows. A job that starts, or whose
// steering no longer applies, is no longer kept off (a running job's
// ExcNodeList is Slurm's to keep; a requeue makes it pending again and
// judged again).
//
// The core knows a running job's first node only, which a job on several
// nodes fills (reclaim's usedOn). A node counts as an idle owner's cell
// when it is wholly free and some of its GPUs are bound to another
// account: Slurm steers by nodes, not by GPUs within one.
//
// The same pass writes each GPU job's quota state into its AdminComment
// (quotaShown.segment), only when it changed, and publishes the GPUs stranded
// in pieces too small for the smallest waiting within-quota job
// (lachesis_quota_stranded_gpus).

const (
	// maxSteeredBorrowers bounds the waiting borrowers placed per pass
	// (best ranked first); the others keep the steering they had.
	maxSteeredBorrowers = 256
	// maxPlaceVisits bounds the node visits of a pass's placement (a
	// large cluster with many borrowers); past it, the rest keep the
	// steering they had.
	maxPlaceVisits = 1 << 17
	// maxExclusionsKept bounds the borrowers remembered as refused.
	maxExclusionsKept = 4096
	// QuotaSegmentPrefix starts a job's quota segment in its AdminComment
	// (cgo/lachesis_core.h LACHESIS_QUOTA_PREFIX).
	QuotaSegmentPrefix = "[quota: "
	// maxQuotaState bounds the state text of a segment (quotaShown.segment
	// callers), and QuotaSegmentMax a whole segment: what
	// lachesis_prio_t.quota must hold.
	maxQuotaState   = 56
	QuotaSegmentMax = len(QuotaSegmentPrefix) + priority.MaxAccountName + 1 + maxQuotaState + 1
)

// quotaPlace is the steering and the quota segments between passes;
// in quotaState, under mu.
type quotaPlace struct {
	// of is the binding nodes was built from; at is each node's place in
	// nodes by its index in Slurm's node table.
	of       *quota.Binding
	nodes    []placeNode
	at       map[int32]int
	nodeGPUs int // the most GPUs of one node
	// keptOff: the nodes each waiting borrower was kept off at the last
	// pass (node → why), what gpushare was told.
	keptOff map[uint32]map[string]string
	// borrows: the borrowers logged as fitting only on other accounts'
	// idle cells (logged once while so).
	borrows map[uint32]bool
	// shown: each job's quota state as last sent (compared each pass,
	// formatted only when it changed).
	shown map[uint32]quotaShown
	// refused: borrowers Slurm held once kept off (no other node of
	// their partition holds them, which the core cannot see): never kept
	// off again, so the hold and the lift do not alternate.
	refused map[uint32]bool
}

// placeNode is one GPU node of the cluster as placement reads it.
type placeNode struct {
	index  int32
	name   string
	gpus   int
	owners []int // the accounts (binding indexes) its GPUs are bound to
	free   int   // scratch: the pass's free GPUs, less the borrowers placed
}

// placeNodes is the cluster's GPU nodes with the accounts bound to them,
// rebuilt when the binding changed. Caller holds mu.
func (c *Core) placeNodes() []placeNode {
	b := c.cluster.binding
	p := &c.quota.place
	if b == nil {
		p.of, p.nodes, p.at = nil, nil, nil
		return nil
	}
	if p.of == b.Binding {
		return p.nodes
	}
	byName := map[string]int{}
	if b.Tree != nil {
		for n := range b.Tree.Nodes() {
			byName[b.Tree.NodeName(n)] = n
		}
	}
	p.of, p.nodes, p.at, p.nodeGPUs = b.Binding, p.nodes[:0], map[int32]int{}, 0
	for _, n := range c.cluster.nodes {
		if n.GPUs <= 0 {
			continue
		}
		pn := placeNode{index: n.Index, name: n.Name, gpus: n.GPUs}
		if t, ok := byName[n.Name]; ok {
			pn.owners = b.Tree.NodeOwners(t)
		}
		p.at[n.Index] = len(p.nodes)
		p.nodes = append(p.nodes, pn)
		p.nodeGPUs = max(p.nodeGPUs, n.GPUs)
	}
	return p.nodes
}

// idleCellOfOthers: node n is wholly free (as placed so far) and holds a
// cell bound to an account other than acct (a binding index, -1 none).
func (n *placeNode) idleCellOfOthers(acct int) bool {
	if n.free < n.gpus {
		return false
	}
	for _, o := range n.owners {
		if o != acct {
			return true
		}
	}
	return false
}

// placeBorrowers is the pass's steering and quota state, after reclaim
// (usedOn: the GPUs of the running jobs on each node, as reclaim counted
// them). Caller holds mu.
func (c *Core) placeBorrowers(snaps []Snapshot, out []Decision, usedOn map[int32]int) {
	p := &c.quota.place
	if p.keptOff == nil {
		p.keptOff, p.borrows, p.shown, p.refused = map[uint32]map[string]string{}, map[uint32]bool{}, map[uint32]quotaShown{}, map[uint32]bool{}
	}
	for i := range snaps {
		s := &snaps[i]
		if _, was := p.keptOff[s.ID]; was && s.Held && s.State == StatePending && len(p.refused) < maxExclusionsKept {
			p.refused[s.ID] = true
			c.log.Info(fmt.Sprintf("job %d is held while kept off owners' idle cells; it is no longer kept off them", s.ID), keyJob, s.ID)
		}
	}
	for id := range p.refused {
		if !c.seen[id] {
			delete(p.refused, id)
		}
	}
	nodes := c.placeNodes()
	for i := range nodes {
		nodes[i].free = max(0, nodes[i].gpus-usedOn[nodes[i].index])
	}
	c.met.quotaStranded(c.strandedGPUs(snaps, nodes))

	var borrowers []int
	for k := range c.jobs {
		j := &c.jobs[k]
		if j.State == priority.Pending && j.Quota == priority.QuotaBorrowing && j.GPUs > 0 {
			borrowers = append(borrowers, k)
		}
	}
	slices.SortFunc(borrowers, func(a, b int) int { return c.results[a].Rank - c.results[b].Rank })
	kept := make(map[uint32]map[string]string, len(p.keptOff))
	visits := 0
	for n, k := range borrowers {
		j := &c.jobs[k]
		if p.refused[j.ID] {
			continue
		}
		if n >= maxSteeredBorrowers || visits >= maxPlaceVisits || len(nodes) == 0 {
			if prev, ok := p.keptOff[j.ID]; ok {
				kept[j.ID] = prev // not placed this pass: left as it is
			}
			continue
		}
		s := &snaps[c.jobIndex[k]]
		acct := strings.ToLower(s.Account)
		off, v := c.steerBorrower(j, s, acct, nodes)
		visits += v
		if off != nil {
			kept[j.ID] = off
		}
	}
	p.keptOff = kept
	if len(p.borrows) > 0 {
		pending := make(map[uint32]bool, len(borrowers))
		for _, k := range borrowers {
			pending[c.jobs[k].ID] = true
		}
		for id := range p.borrows {
			if !pending[id] {
				delete(p.borrows, id)
			}
		}
	}
	c.showQuotaState(snaps, out, nodes)
}

// steerBorrower places waiting borrower j virtually and says which nodes
// it is kept off (nil: none), and how many nodes it visited. Caller
// holds mu.
func (c *Core) steerBorrower(j *priority.Job, s *Snapshot, acct string, nodes []placeNode) (map[string]string, int) {
	owner := c.cluster.binding.Index(acct)
	g, maxNode := int(j.GPUs), max(1, c.quota.place.nodeGPUs)
	// k nodes of per GPUs each: a one-node job needs g on one node.
	k := max(1, int(s.GresRequest.Nodes), (g+maxNode-1)/maxNode)
	per := (g + k - 1) / k
	visits := 0
	pick := func(avoidIdleCells bool) []int {
		var got []int
		for i := range nodes {
			visits++
			n := &nodes[i]
			if n.free >= per && !(avoidIdleCells && n.idleCellOfOthers(owner)) {
				if got = append(got, i); len(got) == k {
					return got
				}
			}
		}
		return nil
	}
	take := func(got []int) {
		for _, i := range got {
			nodes[i].free -= per
		}
	}
	if got := pick(true); got != nil {
		var idle []int
		for i := range nodes {
			if len(idle) < gpushare.MaxKeptOff && nodes[i].idleCellOfOthers(owner) {
				idle = append(idle, i)
			}
		}
		visits += len(nodes)
		take(got)
		delete(c.quota.place.borrows, j.ID)
		if len(idle) == 0 {
			return nil, visits
		}
		// The same nodes as at the last pass: the same map (no new
		// reasons to format, and gpushare sees nothing changed).
		prev := c.quota.place.keptOff[j.ID]
		if len(prev) == len(idle) && !slices.ContainsFunc(idle, func(i int) bool { _, ok := prev[nodes[i].name]; return !ok }) {
			return prev, visits
		}
		off := make(map[string]string, len(idle))
		for _, i := range idle {
			off[nodes[i].name] = c.keptOffWhy(nodes[i].owners, acct)
		}
		return off, visits
	}
	got := pick(false)
	take(got)
	if got != nil && !c.quota.place.borrows[j.ID] {
		c.quota.place.borrows[j.ID] = true
		c.log.Info(fmt.Sprintf("job %d of account %s borrows other accounts' idle quota cells: it fits nowhere else now", j.ID, acct),
			keyJob, j.ID, keyAccount, acct, "nodes", k, "gpus_per_node", per)
	}
	return nil, visits
}

// keptOffWhy says why a borrower of acct is kept off a node whose GPUs
// are bound to owners (binding indexes).
func (c *Core) keptOffWhy(owners []int, acct string) string {
	names := make([]string, 0, len(owners))
	for _, o := range owners {
		if a := c.cluster.binding.Accounts[o]; a != acct {
			names = append(names, a)
		}
	}
	return fmt.Sprintf("an idle quota cell of account %s (a borrower of account %s that fits on other nodes leaves it whole)",
		strings.Join(names, ","), acct)
}

// keptOffFor is the nodes job id is kept off this pass (judgeSharing
// hands them to gpushare); nil for none. Caller holds mu.
func (c *Core) keptOffFor(id uint32) map[string]string {
	return c.quota.place.keptOff[id]
}

// strandedGPUs is the pass's fragmentation: free GPUs on nodes that
// cannot hold the smallest waiting within-quota job (cells.StrandedOn);
// 0 when none waits or before the node table.
func (c *Core) strandedGPUs(snaps []Snapshot, nodes []placeNode) int {
	minJob := 0
	for k := range c.jobs {
		j := &c.jobs[k]
		if j.State == priority.Pending && j.Quota == priority.QuotaWithin && !j.Deferred && j.GPUs > 0 {
			if g := int(j.GPUs); minJob == 0 || g < minJob {
				minJob = g
			}
		}
	}
	n := 0
	for i := range nodes {
		n += cells.StrandedOn(nodes[i].free, nodes[i].gpus, minJob)
	}
	return n
}

// showQuotaState sets each GPU job's quota segment where it changed since
// the last one sent (Decision.Quota). Caller holds mu.
func (c *Core) showQuotaState(snaps []Snapshot, out []Decision, nodes []placeNode) {
	p := &c.quota.place
	ownersOf := func(index int32) []int {
		if i, ok := p.at[index]; ok {
			return nodes[i].owners
		}
		return nil
	}
	for k := range c.jobs {
		j := &c.jobs[k]
		if j.Quota == priority.QuotaOff || j.GPUs == 0 {
			continue
		}
		s := &snaps[c.jobIndex[k]]
		acct := strings.ToLower(s.Account)
		st := quotaShown{account: acct}
		switch {
		case j.Quota == priority.QuotaWithin:
			st.state, st.gpus, st.quota = "within", int(j.GPUs), c.quotaGPUs(acct)
		case j.State == priority.Pending && p.keptOff[j.ID] != nil:
			st.state = "borrowing, kept off other accounts' idle cells"
		case j.State == priority.Pending:
			st.state = "borrowing idle GPUs"
		case nodes == nil || s.NodeCount == 0:
			st.state = "borrowing"
		case slices.ContainsFunc(ownersOf(s.FirstNode), func(o int) bool { return c.cluster.binding.Accounts[o] != acct }):
			st.state = "borrowing from idle cells"
		default:
			st.state = "borrowing unbound GPUs"
		}
		if p.shown[j.ID] == st {
			continue
		}
		p.shown[j.ID] = st
		out[c.jobIndex[k]].Quota = st.segment()
	}
	for id := range p.shown {
		if !c.seen[id] {
			delete(p.shown, id)
		}
	}
}

// quotaShown is a job's quota state: its account and state, and for a
// job within its quota its GPUs and the quota's.
type quotaShown struct {
	account, state string
	gpus, quota    int
}

// segment is the job's quota segment: what Lachesis writes of its quota
// state into its AdminComment. The account is Slurm's (no brackets: the
// plugin refuses a segment with ']' before its end).
func (q quotaShown) segment() string {
	state := q.state
	if q.gpus > 0 {
		state = fmt.Sprintf("%s %d/%d GPUs", q.state, q.gpus, q.quota)
	}
	return QuotaSegmentPrefix + q.account + " " + state + "]"
}
