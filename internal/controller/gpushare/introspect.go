package gpushare

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// Introspection (Gandiva, OSDI'18) in slurmctld: a guaranteed job and an
// opportunistic job whose processes share one GPU (the same node and GPU
// uuid in the agents' GPU-use reports) are a pair. The guaranteed job's
// rate while it had the GPU alone is its solo rate; its rate since the
// guest came (the samples since the GPU's sharer count last changed,
// once the agent's smoothing has let go of the state before: IntroSettle)
// is its shared rate, and the guest's are measured the same way when it
// ran alone before. The pair is judged as the simulator judges its pairs
// (sharing.Config.JudgePair, then sharing.Table.Learn): when the host lost
// more than sharing.max_slowdown, or the pair does no more than the host
// alone, the guest is requeued, the pair of models is marked bad in the
// pair table, and the guest is kept off that node; otherwise the measured
// fractions replace whatever the table held for the pair.
//
// The rate is iterations/s when the guaranteed job reported progress both
// alone and shared: that is useful work, what the rule is about. Failing
// that it is the job's GPU utilisation (NVML's per-process SM share),
// which falls as a neighbour takes the GPU's time; it overstates the
// loss of a job whose kernels merely wait longer, so it is the fallback
// only (issue 22: "utilisation is the fallback signal").
//
// Everything here reads the agents' reports, which ReportGPUUse already
// checked (the job runs, the uid owns it). The guaranteed job's rate is
// its owner's word: a host can fake a slowdown (report fewer iterations
// once a guest arrives) and so evict guests beside it. That only ever
// requeues opportunistic jobs, which by AntMan's contract yield to any
// guaranteed job anyway; it cannot requeue a guaranteed job, nor a job
// on another GPU, and the bad mark it leaves applies to the host's and
// that guest's users only (sharing.Party: to everyone's jobs only with
// sharing.pair_quorum parties without a user in common; issue 34,
// docs/security.md).

const (
	// introMinSamples: a rate needs this many samples before a pair is
	// judged on it.
	introMinSamples = 2
)

// IntroSettle is how long after a window of sharers opened a job's
// iterations/s count in it. The agent's rate is a moving average with
// time constant wire.ProgressTau, so after the sharers change it carries
// the state before for a while: a host whose harmful guest left reads
// slow beside its remaining guest (or alone) for tens of seconds, and
// judged on that the remaining guest was requeued and kept off the node
// for the one that left (issue 34 item 4). After three time constants
// the state before weighs e^-3 (5%) of the difference: a host the guest
// that left had halved reads at most 2.5% slow for it, half the default
// max_slowdown (after two, 6.8%: a harmless guest requeued at the
// defaults). It is counted from the report that opened the window (the
// change came before it) to the time of the rate's last count
// (JobProgress.At: a rate not updated since is as old as that), so the
// wait is never shorter than the average needs.
//
// Utilisation needs no such wait: the agent reads NVML's per-process
// utilisation as the mean of the samples since its last read
// (node-agent/telemetry's processUtil), one interval, not averaged across
// reports; only a window's first report spans the change, and it is
// skipped.
const IntroSettle = 3 * wire.ProgressTau

// introSettleSec is IntroSettle in the reports' seconds.
const introSettleSec = int64(IntroSettle / time.Second)

// MetricReverts counts opportunistic jobs requeued by introspection.
const MetricReverts = "lachesis_sharing_reverts_total"

// rateMean is a running mean.
type rateMean struct {
	sum float64
	n   int
}

func (m *rateMean) add(v float64) {
	if !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 {
		m.sum += v
		m.n++
	}
}

func (m rateMean) mean() float64 { return m.sum / float64(m.n) }

// introRates is what one job's reports say about its rate alone and in
// its current shared window.
type introRates struct {
	// exact: the reports carry exact rates, not the agent's moving
	// average (Sharing.AssumeExactRates): windows count at once.
	exact                   bool
	soloIters, soloUtil     rateMean // samples while alone on its GPUs
	sharedIters, sharedUtil rateMean // samples since sharers last changed
	// sharers in the current window (1: alone; 0: nothing seen yet);
	// since: the report time that opened it.
	sharers int
	since   int64
	// first: the current window is the first the controller saw of the
	// job, whose agent's rate then carries no other window's state (the
	// job's first interval seeds it), so its iterations count at once;
	// unsettled: iterations samples of the current window not counted
	// (younger than IntroSettle).
	first     bool
	unsettled int
	// node and gpu: where the job's last report put it (its first GPU:
	// pairs are judged on one-GPU jobs, the ones shards make); gpus: all
	// of them (at most maxTrackedGPUs), which occupancy reads.
	node, gpu string
	gpus      []string
	// at: the report time of the last sample.
	at int64
	// util: the utilisation of the last counted sample; winUtil: the
	// current window's; before: the previous window's mean on the same
	// GPU (0 for a job new to it). rise is what a revert charges a guest
	// by (judgePairs).
	util    float64
	winUtil rateMean
	before  float64
}

// rise is how far the job's utilisation rose since its GPU's sharers
// last changed: its last sample's less its mean in the window before (a
// job that came to the GPU with the change rose from 0).
func (r *introRates) rise() float64 { return r.util - r.before }

// observe folds one checked entry of node's report at time at.
func (r *introRates) observe(e *wire.JobUsage, node string, at int64) {
	sharers, util := 1, 0.0
	for _, g := range e.GPUs {
		sharers = max(sharers, g.Sharers)
		util += g.UtilPct
	}
	util /= float64(len(e.GPUs))
	iters := math.NaN()
	if e.Progress != nil {
		iters = e.Progress.ItersPerSec
	}
	gpu := e.GPUs[0].UUID
	if !sameGPUs(r.gpus, e.GPUs) {
		r.gpus = r.gpus[:0]
		for _, g := range e.GPUs[:min(len(e.GPUs), maxTrackedGPUs)] {
			r.gpus = append(r.gpus, g.UUID)
		}
	}
	if sharers != r.sharers || node != r.node || gpu != r.gpu {
		// A new window: its first sample is skipped (the agent's
		// utilisation spans the change), its iterations until they
		// settle (settledIters).
		switch {
		case node != r.node || gpu != r.gpu:
			r.before, r.util = 0, 0
		case r.winUtil.n > 0:
			r.before = r.winUtil.mean()
		}
		r.winUtil = rateMean{}
		r.first, r.unsettled = r.sharers == 0, 0
		r.sharers, r.since, r.node, r.gpu = sharers, at, node, gpu
		r.sharedIters, r.sharedUtil = rateMean{}, rateMean{}
		r.at = at
		return
	}
	r.at = at
	if !math.IsNaN(util) && !math.IsInf(util, 0) && util >= 0 {
		r.util = util
		r.winUtil.add(util)
	}
	iters = r.settledIters(iters, e.Progress, at)
	if sharers == 1 {
		// A solo window too: a host whose guest left reads slower
		// alone until the shared state has faded.
		r.soloIters.add(iters)
		r.soloUtil.add(util)
		return
	}
	r.sharedIters.add(iters)
	r.sharedUtil.add(util)
}

// settledIters is iters when it counts in the current window (the
// window is the job's first, or the rate's last count came IntroSettle
// or more after the window opened), else NaN, which no mean takes, and
// the window counts one more unsettled sample.
func (r *introRates) settledIters(iters float64, p *wire.JobProgress, at int64) float64 {
	if math.IsNaN(iters) || r.first || r.exact {
		return iters
	}
	countAt := at
	if p != nil && !p.At.IsZero() {
		countAt = min(countAt, p.At.Unix())
	}
	if countAt-r.since >= introSettleSec {
		return iters
	}
	r.unsettled++
	return math.NaN()
}

// sameGPUs says whether ids are the (bounded) uuids of gpus.
func sameGPUs(ids []string, gpus []wire.JobGPUUsage) bool {
	if len(ids) != min(len(gpus), maxTrackedGPUs) {
		return false
	}
	for i, id := range ids {
		if gpus[i].UUID != id {
			return false
		}
	}
	return true
}

// Signals a pair is judged on (the log line and the metric's label).
const (
	signalIters = "iterations_per_s"
	signalUtil  = "gpu_util"
)

// rates is the host's solo and shared rate: iterations/s when it has
// enough of both, else GPU utilisation; ok is false while either has
// fewer than introMinSamples samples, and while a job with a solo rate
// in iterations/s has its shared ones still settling (it is judged on
// them once they count, not on the fallback meanwhile).
func (r *introRates) rates() (solo, shared float64, signal string, ok bool) {
	if r.soloIters.n >= introMinSamples {
		if r.sharedIters.n >= introMinSamples {
			return r.soloIters.mean(), r.sharedIters.mean(), signalIters, true
		}
		if r.unsettled > 0 {
			return 0, 0, "", false
		}
	}
	if r.soloUtil.n >= introMinSamples && r.sharedUtil.n >= introMinSamples {
		return r.soloUtil.mean(), r.sharedUtil.mean(), signalUtil, true
	}
	return 0, 0, "", false
}

// pairMember is one job on a shared GPU as the pass sees it.
type pairMember struct {
	id            uint32
	uid           uint32 // its owner: who a measurement of its pair is by
	opportunistic bool
	model         string
	rates         *introRates
}

// party is who measured the pair of host and guest: their owners
// (sharing.Party; what they measured applies to their own jobs, issue 34).
func party(hostUID, guestUID uint32) sharing.Party {
	return sharing.Party{Host: strconv.FormatUint(uint64(hostUID), 10), Guest: strconv.FormatUint(uint64(guestUID), 10)}
}

// pairVerdict is what judgePairs decided for one shared GPU: the rules'
// verdict (sharing.Config.JudgePair) on the pair's measured rates.
type pairVerdict struct {
	host, guest pairMember
	node        string
	signal      string
	// rates: the host's solo and shared rate; the guest's when it was
	// measured alone and is the GPU's only guest (guestKnown), else NaN.
	rates      sharing.PairRates
	guestKnown bool
	sharing.PairVerdict
}

// judgePairs finds the pairs among the jobs on shared GPUs and judges
// each: per GPU (node and uuid) with exactly one guaranteed job and at
// least one opportunistic job in the same window, the pair's measured
// rates against cfg.JudgePair (the simulator's introspection too). With
// several guests the one charged (requeued on a revert) is the one whose
// GPU utilisation rose most since the GPU's sharers last changed
// (introRates.rise: a guest that came with the change rose from 0, so a
// newcomer that slowed the host goes, as Gandiva reverts the last
// packing; an earlier guest that saturated the GPU after it is charged,
// not the newcomer: issue 34 item 4); a tie (within chargeTie) goes to
// the one that came last, then to the larger job id. A GPU with several
// guaranteed jobs (two guaranteed shard jobs, and a guest) is not
// judged: whose loss is whose cannot be told; nor is a GPU whose jobs in
// the pass are not the host's window's sharers (one left or came since
// its last report). A guest on shares of several GPUs (Slurm 23.11+'s
// MULTIPLE_SHARING_GRES_PJ) is a member of each of its GPUs (at most
// maxTrackedGPUs), so each of its hosts is judged; one revert requeues
// it. Pure: the caller applies the verdicts.
func judgePairs(cfg sharing.Config, members []pairMember) []pairVerdict {
	type onGPU struct {
		m    pairMember
		uuid string
	}
	placed := make([]onGPU, 0, len(members))
	for _, m := range members {
		if m.opportunistic && len(m.rates.gpus) > 1 {
			for _, uuid := range m.rates.gpus {
				placed = append(placed, onGPU{m, uuid})
			}
			continue
		}
		placed = append(placed, onGPU{m, m.rates.gpu})
	}
	order, groups := sharedGPUs(placed, func(p onGPU) (string, string, bool) {
		return p.m.rates.node, p.uuid, p.m.rates.sharers >= 2 && p.uuid != ""
	})
	var out []pairVerdict
	for _, k := range order {
		var host pairMember
		hosts, guests := 0, []pairMember(nil)
		for _, p := range groups[k] {
			m := p.m
			if m.opportunistic {
				guests = append(guests, m)
			} else {
				host = m
				hosts++
			}
		}
		if hosts != 1 || len(guests) == 0 {
			continue
		}
		if len(groups[k]) != host.rates.sharers {
			// The host's window and the pass disagree on who is on
			// the GPU: a sharer left (its requeue carried out) or came
			// since the host's last report. Judged on that window, the
			// guests still there would be charged for the one that
			// left; they are judged once the reports show the change.
			continue
		}
		solo, shared, signal, ok := host.rates.rates()
		if !ok {
			continue
		}
		last := guests[0]
		for _, g := range guests[1:] {
			if chargedBefore(g, last) {
				last = g
			}
		}
		v := pairVerdict{host: host, guest: last, node: k.node, signal: signal,
			rates: sharing.PairRates{HostSolo: solo, HostShared: shared, GuestSolo: math.NaN(), GuestShared: math.NaN()}}
		if gs, gsh, _, ok := last.rates.rates(); ok && len(guests) == 1 {
			// With both jobs measured, the simulator's rule too: a pair
			// whose fractions do not add up to more than the host alone
			// is futile even when the host is within max_slowdown.
			v.rates.GuestSolo, v.rates.GuestShared, v.guestKnown = gs, gsh, true
		}
		v.PairVerdict = cfg.JudgePair(v.rates)
		out = append(out, v)
	}
	return out
}

// chargeTie: utilisation rises (percentage points) this close are a tie.
const chargeTie = 1.0

// chargedBefore says whether guest a is charged for its host's slowdown
// rather than b: its utilisation rose more, or as much and it came later
// (then the larger job id).
func chargedBefore(a, b pairMember) bool {
	if ra, rb := a.rates.rise(), b.rates.rise(); math.Abs(ra-rb) >= chargeTie {
		return ra > rb
	}
	if a.rates.since != b.rates.since {
		return a.rates.since > b.rates.since
	}
	return a.id > b.id
}

// introState is the core's introspection between passes; under mu.
type introState struct {
	// table: the pair table (sharing.Table), seeded at start from
	// sharing.pair_table (seedPairTable), then filled by introspection:
	// bad pairs and measured fractions, each by its party (the host's
	// and the guest's owners); limits: its bounds, sharing.pair_quorum
	// and sharing.pair_mark_ttl among them (New).
	table  *sharing.Table
	limits sharing.Limits
	// asked: guests whose requeue was asked, until a pass sees them not
	// running (one request per revert).
	asked map[uint32]bool
	// kept: the pairs (guest, host) logged as kept, each with the
	// host's window it was logged in (its since): one line per pair and
	// window of sharers, not one per pass (a guest that stays when
	// another leaves is judged, and logged, anew); a guest of several
	// GPUs has a host on each.
	kept map[keptPair]int64
	// queue feeds the requeuer goroutine.
	queue chan requeueRequest
	// unsaved: bad pairs marked since the writer last saved them
	// (ledger bad_pairs, so a restart remembers them).
	unsaved []ledger.BadPair
	// waiting: pending opportunistic jobs and their models; excl: the
	// nodes Lachesis keeps jobs off (exclude.go).
	waiting map[uint32]waitingGuest
	excl    map[uint32]*exclusion
	// keptOff: this pass's pending jobs the core keeps off nodes
	// (Job.KeepOff), read and cleared by excludeBadPairs.
	keptOff map[uint32]map[string]string
	// users: the pass's waiting guests per user (the bounds' fair split).
	users waitingUsers
	// exclChanged: jobs whose saved exclusion changed since the writer
	// last saved them (ledger exclusions; a job no longer in excl is
	// dropped there).
	exclChanged map[uint32]bool
	// queueFull counts the exclusions a pass could not queue.
	queueFull int
}

func (in *introState) init() {
	if in.table == nil {
		in.table = sharing.NewTable(in.limits)
	}
	if in.asked == nil {
		in.asked = map[uint32]bool{}
		in.kept = map[keptPair]int64{}
		in.waiting = map[uint32]waitingGuest{}
		in.excl = map[uint32]*exclusion{}
		in.exclChanged = map[uint32]bool{}
	}
}

// introspect is the pass's introspection step (Judge), called
// with mu held: it judges every pair and asks for the requeues.
// Nothing here blocks: a requeue is handed to the requeuer goroutine.
func (c *Sharing) introspect(now int64) {
	u := &c.use
	in := &c.intro
	in.init()
	var members []pairMember
	for id, l := range u.live {
		if in.asked[id] && !l.running {
			delete(in.asked, id)
		}
		j := u.jobs[id]
		if j == nil || l.pass != u.pass || !l.running || j.rates.sharers < 2 {
			continue
		}
		members = append(members, pairMember{id: id, uid: l.uid, opportunistic: l.opportunistic, model: l.model, rates: &j.rates})
	}
	for id := range in.asked {
		if _, ok := u.live[id]; !ok {
			delete(in.asked, id)
		}
	}
	for p := range in.kept {
		if _, ok := u.live[p.guest]; !ok {
			delete(in.kept, p)
		}
	}
	if len(members) < 2 {
		return
	}
	cfg := c.cfg.Sharing.Rules
	for _, v := range judgePairs(cfg, members) {
		solo, shared := v.rates.HostSolo, v.rates.HostShared
		if !v.Revert {
			c.measurePair(v, now)
			if in.asked[v.guest.id] {
				// Its requeue is asked (by the memory bound this pass,
				// or by a revert Slurm has not carried out yet): it is
				// not kept. The speeds measured still hold.
				continue
			}
			if p, since := (keptPair{guest: v.guest.id, host: v.host.id}), v.host.rates.since; in.kept[p] != since {
				in.kept[p] = since
				c.log.Info(fmt.Sprintf("job %d kept: its neighbour job %d ran %s%% slower than alone (max_slowdown %s%%)",
					v.guest.id, v.host.id, pct(max(0, sharing.Loss(solo, shared))), pct(cfg.MaxSlowdown)),
					keyJob, v.guest.id, "host", v.host.id, "signal", v.signal, "solo", solo, "shared", shared,
					"sharers", v.host.rates.sharers)
			}
			continue
		}
		if in.asked[v.guest.id] {
			continue
		}
		by := party(v.host.uid, v.guest.uid)
		if marked, err := in.table.LearnBy(by, now, v.host.model, v.guest.model, v.PairVerdict, v.rates.Of(), v.rates.Beside()); err != nil {
			c.log.Warn("pair table refused a bad pair", keyErr, err)
		} else if marked && len(in.unsaved) < ledger.MaxBadPairs {
			in.unsaved = append(in.unsaved, ledger.BadPair{Host: v.host.model, Guest: v.guest.model, HostUser: by.Host, GuestUser: by.Guest, At: now})
		}
		node := v.node
		if !slurmNodeName(node) {
			node = "" // requeued, but not kept off a node it cannot name safely
		}
		// why: the log line's reason; the exclusion's names the host's model.
		why := fmt.Sprintf("its neighbour job %d ran %s%% slower than alone (max_slowdown %s%%)",
			v.host.id, pct(sharing.Loss(solo, shared)), pct(cfg.MaxSlowdown))
		pinWhy := fmt.Sprintf("its neighbour job %d (model %s) ran %s%% slower than alone (max_slowdown %s%%)",
			v.host.id, v.host.model, pct(sharing.Loss(solo, shared)), pct(cfg.MaxSlowdown))
		if v.Futile {
			why = fmt.Sprintf("beside its neighbour job %d (at %s%% of its solo rate) it ran at %s%% of its own: the pair does less than the host alone",
				v.host.id, pct(v.rates.Of()), pct(v.rates.Beside()))
			pinWhy = fmt.Sprintf("%s (host model %s)", why, v.host.model)
		}
		guest, host, signal, vnode, hostModel, guestModel := v.guest.id, v.host.id, v.signal, v.node, v.host.model, v.guest.model
		requeued := func() { // the requeuer's, once Slurm requeued it
			c.met.revert(signal)
			c.log.Info(fmt.Sprintf("job %d requeued: %s", guest, why),
				keyJob, guest, "host", host, "signal", signal, "solo", solo, "shared", shared,
				"node", vnode, "host_model", hostModel, "guest_model", guestModel)
		}
		select {
		case in.queue <- requeueRequest{job: v.guest.id, node: node, requeued: requeued, why: why}:
			in.asked[v.guest.id] = true
		default:
			c.log.Warn("requeue queue full; the next pass asks again", keyJob, v.guest.id)
			continue
		}
		if node != "" {
			c.pinOff(v.guest.id, v.host.id, node, "introspection requeued it from there: "+pinWhy, now)
		}
	}
}

// measurePair records a kept pair's measured fractions (introspection
// replaces the seed: sharing.Table.Learn). The guest's own fraction needs
// its solo rate, which a guest that never ran alone lacks; the table's
// earlier figure for it is kept then, and a pair with neither is left for
// a later pass.
func (c *Sharing) measurePair(v pairVerdict, now int64) {
	beside := math.NaN() // not measured: the table's figure stays
	if v.guestKnown {
		if beside = v.rates.Beside(); math.IsNaN(beside) {
			return // a guest measured at 0 alone and beside: nothing the table takes
		}
	}
	_, _ = c.intro.table.LearnBy(party(v.host.uid, v.guest.uid), now, v.host.model, v.guest.model, v.PairVerdict, v.rates.Of(), beside)
}

// slurmNodeName says whether name is one plain Slurm node name, safe to
// put in ExcNodeList: the node comes from an agent's report, and a list
// or a host range there would keep the guest off more than one node.
func slurmNodeName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 0, 64) }

// keptPair is a guest and a host it was logged as kept beside.
type keptPair struct{ guest, host uint32 }

// gpuKey names one GPU: its node and NVML uuid.
type gpuKey struct{ node, uuid string }

// sharedGPUs groups the jobs the agents saw on shared GPUs by GPU, in the
// order each GPU first appears (so verdicts and logs are deterministic).
// at says where a member is and whether its GPU had several jobs; the
// rest are left out. One home for introspection's and the memory bound's
// grouping.
func sharedGPUs[M any](members []M, at func(M) (node, uuid string, shared bool)) ([]gpuKey, map[gpuKey][]M) {
	groups := map[gpuKey][]M{}
	var order []gpuKey
	for _, m := range members {
		node, uuid, shared := at(m)
		if !shared {
			continue
		}
		k := gpuKey{node, uuid}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	return order, groups
}
