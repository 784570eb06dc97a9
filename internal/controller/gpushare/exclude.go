package gpushare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// Which opportunistic job goes beside which guaranteed one, the Slurm way.
//
// Slurm 22.05's select plugin puts a shard job on whatever shards are free;
// the only handles Lachesis has on a pending job are its own fields. Two
// are used, both recomputed at every pass from the node agents' reports
// (which job runs on which GPU of which node) and the pair table (seeded
// from Gavel's measurements, then what introspection measured):
//
//   - ExcNodeList: a waiting opportunistic job is kept off every node
//     where it could only land beside a guaranteed job it would slow by
//     more than sharing.max_slowdown (sharing.Config.Fits: measured bad,
//     did not run together, or predicted too slow) — every GPU of the
//     node is held whole or by such a host. The table is read as the
//     guest's owner and each host's owner see it (sharing.Table.For:
//     another user's measurement counts only with a quorum, issue 34).
//     A node with one GPU it may
//     use is left open: which GPU's shard Slurm picks cannot be steered,
//     and introspection reverts a bad landing within a pass. A revert
//     also pins its guest off its host's node while the host runs, for
//     at most pinFor.
//   - priority: among waiting opportunistic jobs of one Tiresias queue,
//     the one whose best predicted pair is best goes first
//     (priority.Job.Pair, recorded as Factors.Pair), so the guest Slurm
//     tries first beside a guaranteed job is the one
//     sharing.Config.Choose would pick. Its scores come from the previous
//     pass's judgement (the ranker runs before this step).
//
// The core adds a reason of its own: a waiting quota borrower kept off
// other accounts' idle quota cells (Job.KeepOff, core/quotaplace.go),
// joined to the nodes above for a guest, and the only reason for a job
// that is none; the same edits, bounds and restart state.
//
// The ExcNodeList edits are Lachesis's own set, kept apart from the
// user's list: the requeuer goroutine reads the job's list from Slurm
// (squeue, outside slurmctld's locks), takes out only the nodes Lachesis
// added, adds the ones it wants now, and writes the union; when none is
// wanted any more, the user's list is written back exactly as it was read.
// A node the user excluded is never Lachesis's, so never lifted. Each
// change is logged with its reason.
//
// What a restart cannot recompute is kept in the ledger (exclusions,
// exclusion_holds; written by the writer goroutine when a job's state
// changed, dropped when Lachesis forgets the job): the user's list as
// read, the nodes Lachesis added, and why each node is kept off (the host
// job on it, a pin's end). Restored at start (restoreExclusions), a
// judged node is held while its host runs for occupancyFresh (the agents'
// reports that judge it again are not in yet), a pin while its host runs
// until its end; the first passes then lift exactly Lachesis's nodes,
// writing back the user's own list, once the reason has ended, and a job
// that finished meanwhile is forgotten.

const (
	// maxWaitingGuests bounds the waiting opportunistic jobs judged per
	// pass, and maxGuestModels the distinct models and owners among them
	// (the work is per model, owner and node, not per job). Both are
	// split fairly among the users with waiting guests (guestShare): one
	// user's flood takes at most its share, never everyone's steering.
	maxWaitingGuests = 1024
	maxGuestModels   = 64
	// exclusionWindow (seconds) and exclusionSends rate-limit the
	// ExcNodeList updates the pass queues for one job: a job whose update
	// keeps failing (a list over the bounds, a refusal) costs at most
	// exclusionSends rounds of Slurm commands per window, not one per pass.
	exclusionWindow = 600
	exclusionSends  = 6
	// maxExclusions bounds the jobs whose exclusions are tracked (and
	// saved: the ledger keeps as many), and maxExcludedNodes the nodes one
	// job is kept off by judgement (its ExcNodeList stays short; a guest
	// that fits nowhere else still has promote_after).
	maxExclusions    = ledger.MaxExclusions
	maxExcludedNodes = 64
	// pinFor bounds how long (seconds) a revert keeps its guest off its
	// host's node while the host still runs there.
	pinFor = 3600
	// occupancyFresh: a job's last report older than this (seconds) does
	// not place it on a GPU (its agent may be gone).
	occupancyFresh = 180
	// maxTrackedGPUs bounds the GPUs of one job's report that occupancy
	// keeps.
	maxTrackedGPUs = 16
	// maxExcludedList (bytes) and maxListNodes bound a job's ExcNodeList
	// that Lachesis edits; a longer one is left alone.
	maxExcludedList = 8192
	maxListNodes    = 2048
	// staleSent marks an exclusion whose last update did not land: the
	// next pass that sees the job waiting sends it again.
	staleSent = "\x00"
)

// waitingGuest is a pending opportunistic job as the last pass saw it.
type waitingGuest struct {
	model string // sharing.ModelKey of its model key ("" unknown)
	uid   uint32 // its owner: the pair table is read as its party sees it
	pass  uint64
}

// guestKind is what a waiting guest is judged by: its model and its
// owner (the pair table's view differs per pair of users, issue 34).
type guestKind struct {
	model string
	uid   uint32
}

// waitingUsers is the pass's count of waiting guests per user, for the
// fair split of the bounds (noteWaiting, excludeBadPairs).
type waitingUsers struct {
	pass     uint64          // the pass counted
	admitted map[uint32]int  // guests recorded per user this pass
	seen     map[uint32]bool // users with a waiting guest this pass, at most maxWaitingGuests
	lastSeen int             // len(seen) of the last pass
	total    int             // guests recorded this pass
	models   map[uint32]int  // guest kinds judged per user this pass
}

// guestShare is each of users' fair share of bound (at least 1).
func guestShare(bound, users int) int {
	return max(1, bound/max(1, users))
}

// pin keeps a reverted guest off its host's node.
type pin struct {
	host  uint32
	until int64
	why   string
}

// exclusion is what Lachesis keeps one job off. The pass owns pins, want,
// judged, sent and seen; the requeuer writes userRaw, userSet, ours and
// applied (what Slurm holds now); both under mu. Every change to
// what is saved (all but sent and seen) marks the job for the writer
// (introState.saveExclusion).
type exclusion struct {
	pins map[string]pin
	want map[string]string // node → why, as the last pass decided
	// judged: the host job the pass's judgement found on each of its
	// nodes (a verdict's map, shared, never written).
	judged map[string]uint32
	sent   string // want's nodes as last queued (staleSent: send again)
	seen   uint64 // the pass that last saw the job not finished
	// sendsFrom and sends: the start of the job's rate-limit window and
	// the updates queued in it (exclusionSends).
	sendsFrom int64
	sends     int
	// over: the pass that saw the job waiting past the bounds (its user's
	// share): not judged then, its exclusion left as it is.
	over uint64
	// userRaw is the user's own list as read (written back verbatim),
	// userSet its nodes; ours are the nodes Lachesis added to it.
	userRaw string
	userSet []string
	ours    []string
	applied bool
}

// gpuUse is what holds one GPU: a job holding it whole (no guest fits
// there) or the guaranteed jobs on its shards.
type gpuUse struct {
	whole bool
	hosts []pairHost
}

type pairHost struct {
	id    uint32
	uid   uint32
	model string
}

// nodeUse is one node's GPUs as the reports show them: gpus is the node's
// GPU count (from the pass's snapshots; 0 unknown: never excluded), whole
// how many are held whole, shared the guaranteed jobs on each other GPU
// that has any.
type nodeUse struct {
	name   string
	gpus   uint32
	whole  uint32
	shared [][]pairHost
}

// guestVerdict is one model's judgement against the cluster this pass.
type guestVerdict struct {
	excluded map[string]string // node → why
	hosts    map[string]uint32 // node → the host it may not go beside
	score    float64           // best predicted speed of a host beside it
}

// occupancy is every node in the reports with its GPUs' holders. Caller
// holds mu.
func (c *Sharing) occupancy(now int64) []nodeUse {
	u := &c.use
	type building struct {
		gpus uint32
		use  map[string]*gpuUse
	}
	byNode := map[string]*building{}
	for id, l := range u.live {
		j := u.jobs[id]
		if !l.running || l.pass != u.pass || j == nil || j.rates.node == "" || now-j.rates.at > occupancyFresh {
			continue
		}
		n := byNode[j.rates.node]
		if n == nil {
			n = &building{use: map[string]*gpuUse{}}
			byNode[j.rates.node] = n
		}
		if l.oneNode {
			n.gpus = max(n.gpus, l.nodeGPUs)
		}
		for _, uuid := range j.rates.gpus {
			g := n.use[uuid]
			if g == nil {
				g = &gpuUse{}
				n.use[uuid] = g
			}
			switch {
			case !l.gpuShare:
				g.whole = true
			case !l.opportunistic && l.model != "":
				g.hosts = append(g.hosts, pairHost{id: id, uid: l.uid, model: l.model})
			}
		}
	}
	out := make([]nodeUse, 0, len(byNode))
	for name, b := range byNode {
		n := nodeUse{name: name, gpus: b.gpus}
		for _, g := range b.use {
			switch {
			case g.whole:
				n.whole++
			case len(g.hosts) > 0:
				n.shared = append(n.shared, g.hosts)
			}
		}
		if n.gpus > 0 && len(n.shared) > 0 && slurmNodeName(name) {
			out = append(out, n)
		}
	}
	// One order for every pass's judgement: which nodes a job is kept off
	// when more than maxExcludedNodes qualify must not change by chance.
	slices.SortFunc(out, func(a, b nodeUse) int { return strings.Compare(a.name, b.name) })
	return out
}

// judgeGuest is where a guest of model m may not go: the nodes whose every
// GPU is held whole or by a guaranteed job m does not fit beside (and at
// least one by such a host), with the reason, at most maxExcludedNodes of
// them; and its pair score, the best predicted speed of a host it fits
// beside. A host whose model is unknown is not judged (introspection
// measures that pair). The pair table is read as a host's owner and the
// guest's owner (uid) see it at now (sharing.Table.For): another user's
// measurement keeps this guest off nowhere without a quorum. The rule is
// asked once per host model and owner.
func judgeGuest(rules sharing.Config, t *sharing.Table, now int64, g guestKind, occ []nodeUse) guestVerdict {
	v := guestVerdict{}
	m := g.model
	if m == "" {
		return v
	}
	type fit struct {
		ok        bool
		predicted float64
	}
	type hostKind struct {
		model string
		uid   uint32
	}
	fits := map[hostKind]fit{}
	// marked: whether anyone measured the pair of each host model and m;
	// a pair nobody measured reads the same (its seed) for every owner,
	// so the rule is asked once per host model, not per owner.
	marked := map[string]bool{}
	for i := range occ {
		n := &occ[i]
		blocked := n.whole
		var badHost *pairHost
		for _, hosts := range n.shared {
			for k := range hosts {
				h := &hosts[k]
				hk := hostKind{model: h.model}
				byUser, seen := marked[h.model]
				if !seen {
					byUser = t.Marked(h.model, m)
					marked[h.model] = byUser
				}
				if byUser {
					hk.uid = h.uid // measured by someone: each host owner's view
				}
				f, seen := fits[hk]
				if !seen {
					f.ok, f.predicted = rules.Fits(t.For(party(h.uid, g.uid), now), h.model, m)
					fits[hk] = f
				}
				if !f.ok {
					blocked++
					if badHost == nil {
						badHost = h
					}
					break
				}
				v.score = max(v.score, f.predicted)
			}
		}
		if badHost != nil && blocked >= n.gpus && len(v.excluded) < maxExcludedNodes {
			if v.excluded == nil {
				v.excluded, v.hosts = map[string]string{}, map[string]uint32{}
			}
			v.excluded[n.name] = badPairWhy(rules, t.For(party(badHost.uid, g.uid), now), *badHost, m)
			v.hosts[n.name] = badHost.id
		}
	}
	return v
}

// badPairWhy says why guest model m does not fit beside host h.
func badPairWhy(rules sharing.Config, t sharing.View, h pairHost, m string) string {
	s, measured, _ := t.Lookup(h.model, m)
	src := "Gavel's measurement"
	if measured {
		src = "introspection"
	}
	switch {
	case t.Bad(h.model, m):
		return fmt.Sprintf("beside job %d (model %s) the pair was measured to slow it beyond max_slowdown", h.id, h.model)
	case s.Of <= 0:
		return fmt.Sprintf("beside job %d (model %s) the pair did not run together (%s)", h.id, h.model, src)
	}
	return fmt.Sprintf("beside job %d (model %s) the pair is predicted to run it at %s%% of its speed alone (%s; max_slowdown %s%%)",
		h.id, h.model, pct(s.Of), src, pct(rules.MaxSlowdown))
}

// heldByItsExclusion: a pending opportunistic job that Slurm holds
// (priority 0) while Lachesis keeps it off nodes. When the exclusion
// leaves the job no node, Slurm's scheduler marks it non-runnable and sets
// its priority to 0 (job_scheduler.c, FAIL_BAD_CONSTRAINTS), so the pass
// no longer ranks it. It is still a waiting guest: its exclusion stays
// while the reason lasts and is lifted when it ends, which makes Slurm
// rank it again (an ExcNodeList update resets its priority). Taken for a
// job that no longer waits, its nodes were lifted at once and set again
// at the next pass, one update per pass. Caller holds mu.
func (c *Sharing) heldByItsExclusion(s *Job) bool {
	ex := c.intro.excl[s.ID]
	return s.Held && ex != nil && len(ex.ours) > 0 && c.cfg.Sharing.Opportunistic(s.Partition)
}

// noteWaiting is the pass's record of a pending job (observe):
// opportunistic ones are judged, and an exclusion of any pending job is
// kept alive. Caller holds mu.
//
// The waiting guests recorded per pass are bounded by maxWaitingGuests in
// all and, per user, by their fair share of it among the users the last
// pass saw waiting (guestShare): a user with a thousand waiting guests
// takes at most their share, and every other user's guests are still
// judged and steered.
func (c *Sharing) noteWaiting(s *Job, opportunistic bool) {
	in := &c.intro
	ex := in.excl[s.ID]
	if ex != nil {
		ex.seen = c.use.pass
	}
	if len(s.KeepOff) > 0 && len(s.KeepOff) <= MaxKeptOff && len(in.keptOff) < maxExclusions {
		if in.keptOff == nil {
			in.keptOff = map[uint32]map[string]string{}
		}
		in.keptOff[s.ID] = s.KeepOff
	}
	if !opportunistic {
		return
	}
	w := &in.users
	if w.pass != c.use.pass {
		w.lastSeen = len(w.seen)
		w.pass, w.total = c.use.pass, 0
		if w.admitted == nil {
			w.admitted, w.seen, w.models = map[uint32]int{}, map[uint32]bool{}, map[uint32]int{}
		}
		clear(w.admitted)
		clear(w.seen)
		clear(w.models)
	}
	if len(w.seen) < maxWaitingGuests {
		w.seen[s.User] = true
	}
	users := max(w.lastSeen, len(w.seen))
	if w.total >= maxWaitingGuests || w.admitted[s.User] >= guestShare(maxWaitingGuests, users) {
		if ex != nil {
			ex.over = c.use.pass
		}
		return
	}
	g, ok := in.waiting[s.ID]
	if !ok && s.Asked != nil {
		g.model = sharing.ModelKey(s.Asked.ModelKey()) // once per job: it copies out of slurmctld
	}
	g.uid, g.pass = s.User, c.use.pass
	in.waiting[s.ID] = g
	w.admitted[s.User]++
	w.total++
}

// excludeBadPairs is the pass's step after introspection: every waiting
// opportunistic job's exclusions and pair score. Caller holds mu
// (Judge); nothing here blocks (updates go to the requeuer).
func (c *Sharing) excludeBadPairs(now int64, pairScores map[uint32]float64) {
	u := &c.use
	in := &c.intro
	in.queueFull = 0
	defer func() {
		if in.queueFull > 0 {
			c.log.Warn("requeue queue full; the next pass sends these exclusions again", keyJobs, in.queueFull)
		}
	}()
	clear(pairScores)
	for id, g := range in.waiting {
		if g.pass != u.pass {
			delete(in.waiting, id)
		}
	}
	var occ []nodeUse
	verdicts := map[guestKind]guestVerdict{}
	rules := c.cfg.Sharing.Rules
	if len(in.waiting) > 0 {
		occ = c.occupancy(now)
	}
	// Each user's share of the models judged: among the users whose
	// guests are recorded this pass.
	w := &in.users
	modelShare := guestShare(maxGuestModels, len(w.admitted))
	for id, g := range in.waiting {
		ex := in.excl[id]
		kind := guestKind{g.model, g.uid}
		v, ok := verdicts[kind]
		if !ok {
			if len(verdicts) >= maxGuestModels || w.models[g.uid] >= modelShare {
				if ex != nil {
					ex.seen = u.pass // not judged this pass: left as it is
				}
				continue
			}
			v = judgeGuest(rules, in.table, now, kind, occ)
			verdicts[kind] = v
			if w.models != nil {
				w.models[g.uid]++
			}
		}
		if v.score > 0 {
			pairScores[id] = v.score
		}
		want := v.excluded
		if ex != nil {
			for node, p := range ex.pins {
				l, live := u.live[p.host]
				if !live || !l.running || now >= p.until {
					delete(ex.pins, node)
					in.saveExclusion(id)
					continue
				}
				if _, ok := want[node]; !ok {
					want = maps(want)
					want[node] = p.why
				}
			}
		}
		if k := in.keptOff[id]; len(k) > 0 {
			want = maps(want)
			for node, why := range k {
				if _, ok := want[node]; !ok {
					want[node] = why
				}
			}
		}
		c.setExclusion(now, id, ex, want, v.hosts)
	}
	// The core's own reasons (Job.KeepOff) for the jobs that are no
	// waiting guests judged above: the same edits, the same bounds.
	for id, k := range in.keptOff {
		if _, guest := in.waiting[id]; !guest {
			c.setExclusion(now, id, in.excl[id], k, nil)
		}
	}
	defer clear(in.keptOff)
	for id, ex := range in.excl {
		if _, waiting := in.waiting[id]; waiting {
			continue
		}
		if _, kept := in.keptOff[id]; kept {
			continue
		}
		if l, live := u.live[id]; live && l.pass == u.pass {
			continue // running: Slurm edits only pending jobs; kept for a requeue
		}
		if ex.over == u.pass {
			continue // waiting past its user's share: not judged, left as it is
		}
		if ex.seen != u.pass {
			delete(in.excl, id) // finished or gone
			in.saveExclusion(id)
			continue
		}
		// Pending, no longer a waiting opportunistic job (held, upgraded
		// to guaranteed): every node of Lachesis's is lifted.
		c.setExclusion(now, id, ex, nil, nil)
	}
}

// maps is a copy of m that may be written.
func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// setExclusion records what job id should be kept off now (judged: the
// host on each node the pass's judgement found), logs the nodes added and
// lifted, and queues the update when it changed since the last one sent.
// Once the queue is full, the pass's other updates wait for the next pass
// (one warning); a job past its exclusionSends in the window waits for the
// next window. Caller holds mu.
func (c *Sharing) setExclusion(now int64, id uint32, ex *exclusion, want map[string]string, judged map[string]uint32) {
	in := &c.intro
	if ex == nil {
		if len(want) == 0 || len(in.excl) >= maxExclusions {
			return
		}
		ex = &exclusion{pins: map[string]pin{}}
		in.excl[id] = ex
	}
	ex.seen = c.use.pass
	if !sameHosts(ex.judged, judged) {
		ex.judged = judged
		in.saveExclusion(id)
	}
	if !sameNodes(ex.want, want) {
		c.logExclusion(id, ex.want, want)
		ex.want = want
		in.saveExclusion(id)
	} else if ex.sent != staleSent {
		if len(want) == 0 && len(ex.ours) == 0 && len(ex.pins) == 0 && ex.sent == "" {
			delete(in.excl, id)
			in.saveExclusion(id)
		}
		return
	}
	if in.queueFull > 0 {
		in.queueFull++
		ex.sent = staleSent
		return
	}
	nodes := sortedNodes(want)
	if nodes == ex.sent {
		return
	}
	if now-ex.sendsFrom >= exclusionWindow {
		ex.sendsFrom, ex.sends = now, 0
	}
	if ex.sends >= exclusionSends {
		ex.sent = staleSent // sent in the next window
		return
	}
	select {
	case in.queue <- requeueRequest{job: id, exclude: true}:
		ex.sent = nodes
		ex.sends++
	default:
		in.queueFull = 1
		ex.sent = staleSent
	}
}

// sameNodes says whether a and b name the same nodes.
func sameNodes(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for n := range a {
		if _, ok := b[n]; !ok {
			return false
		}
	}
	return true
}

// sameHosts says whether a and b name the same hosts on the same nodes.
func sameHosts(a, b map[string]uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for n, h := range a {
		if g, ok := b[n]; !ok || g != h {
			return false
		}
	}
	return true
}

// logExclusion logs the nodes a job is newly kept off (one line per
// reason's first node, the count of the others) and the ones lifted.
func (c *Sharing) logExclusion(id uint32, was, now map[string]string) {
	var added, lifted []string
	for n := range now {
		if _, ok := was[n]; !ok {
			added = append(added, n)
		}
	}
	for n := range was {
		if _, ok := now[n]; !ok {
			lifted = append(lifted, n)
		}
	}
	slices.Sort(added)
	slices.Sort(lifted)
	if len(added) > 0 {
		more := ""
		if len(added) > 1 {
			more = fmt.Sprintf(" (and %d more nodes)", len(added)-1)
		}
		c.log.Info(fmt.Sprintf("job %d kept off node %s%s: %s", id, added[0], more, now[added[0]]), keyJob, id, "nodes", len(added))
	}
	if len(lifted) > 0 {
		c.log.Info(fmt.Sprintf("job %d may run on node %s again: the reason to keep it off has ended", id, strings.Join(lifted, ",")),
			keyJob, id, "nodes", len(lifted))
	}
}

// pinOff is a revert's exclusion: its guest kept off node while host runs
// there (at most pinFor). Caller holds mu; the revert's request
// applies it.
func (c *Sharing) pinOff(guest, host uint32, node, why string, now int64) {
	in := &c.intro
	ex := in.excl[guest]
	if ex == nil {
		if len(in.excl) >= maxExclusions {
			return
		}
		ex = &exclusion{pins: map[string]pin{}}
		in.excl[guest] = ex
	}
	ex.pins[node] = pin{host: host, until: now + pinFor, why: why}
	want := maps(ex.want)
	if _, had := want[node]; !had {
		c.log.Info(fmt.Sprintf("job %d kept off node %s: %s", guest, node, why), keyJob, guest, "node", node)
	}
	want[node] = why
	ex.want = want
	ex.seen = c.use.pass
	ex.sent = sortedNodes(want)
	in.saveExclusion(guest)
}

func sortedNodes(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	nodes := make([]string, 0, len(m))
	for n := range m {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return strings.Join(nodes, ",")
}

// applyExclusion makes the job's ExcNodeList the user's own list plus the
// nodes Lachesis wants it off now. Requeuer goroutine only: Slurm is asked
// outside every lock; mu is held only to read and record.
func (c *Sharing) applyExclusion(ctx context.Context, sj SlurmJobs, job uint32) error {
	c.mu.Lock()
	ex := c.intro.excl[job]
	if ex == nil {
		c.mu.Unlock()
		return nil
	}
	want := strings.Split(sortedNodes(ex.want), ",")
	if want[0] == "" {
		want = nil
	}
	prev := *ex
	c.mu.Unlock()

	raw, pending, err := sj.ExcNodeList(ctx, job)
	if err != nil {
		return err
	}
	if !pending {
		c.markStale(job) // Slurm edits pending jobs only: again when it waits
		return nil
	}
	cur, err := expandNodes(ctx, sj, raw)
	if err != nil {
		return err
	}
	user, userRaw := cur, raw
	if prev.applied {
		// The user's list is what the job holds less what Lachesis put
		// there; written back verbatim while the user did not change it.
		user = without(cur, prev.ours)
		if slices.Equal(user, prev.userSet) {
			userRaw = prev.userRaw
		} else {
			userRaw = strings.Join(user, ",")
		}
	}
	ours := without(want, user)
	next := userRaw
	if len(ours) > 0 {
		if next != "" {
			next += ","
		}
		next += strings.Join(ours, ",")
	}
	if next != raw {
		if err := sj.SetExcNodeList(ctx, job, next); err != nil {
			if errors.Is(err, slurmcmd.ErrJobNotPending) {
				c.markStale(job) // started meanwhile: again when it waits
				return nil
			}
			return err
		}
	}
	c.mu.Lock()
	if ex := c.intro.excl[job]; ex != nil {
		ex.userRaw, ex.userSet, ex.ours, ex.applied = userRaw, user, ours, true
		c.intro.saveExclusion(job)
	}
	c.mu.Unlock()
	return nil
}

// markStale makes the next pass send the job's exclusion again.
func (c *Sharing) markStale(job uint32) {
	c.mu.Lock()
	if ex := c.intro.excl[job]; ex != nil {
		ex.sent = staleSent
	}
	c.mu.Unlock()
}

// expandNodes is a Slurm node list's names, sorted, without repeats;
// "(null)" and "" are none. A list over the bounds is refused.
func expandNodes(ctx context.Context, sj SlurmJobs, list string) ([]string, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "(null)" {
		return nil, nil
	}
	if len(list) > maxExcludedList {
		return nil, fmt.Errorf("ExcNodeList of %d bytes: left alone", len(list))
	}
	var names []string
	if strings.ContainsAny(list, "[]") {
		var err error
		if names, err = sj.Hostnames(ctx, list); err != nil {
			return nil, err
		}
	} else {
		names = strings.Split(list, ",")
	}
	if len(names) > maxListNodes {
		return nil, fmt.Errorf("ExcNodeList of %d nodes: left alone", len(names))
	}
	out := names[:0:0]
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// without is a less the names in b (both sorted or not; a's order kept).
func without(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}
