package core

import (
	"errors"
	"math"
	"strconv"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// A second record of each job's attained service lives in the job itself,
// in Slurm's SystemComment. Why: the ledger is written off slurmctld's
// locks and can fail (full or read-only disk); a kill -9 then loses every
// batch still in memory, and with it service that may have accumulated for
// hours. Slurm saves SystemComment with the job in its own state files, so
// the marker survives whatever the ledger lost, without any extra I/O of
// ours: the pass writes it under the job write lock it already holds, and
// only when the marker changed (a run starts or ends, the queue changes),
// not every pass. On restart the first pass that sees a job compares the
// two and keeps the larger service. SystemComment is meant for system use
// (scontrol shows it, users cannot set it); text an admin put there is kept:
// only the part from MarkerPrefix up to the next ';' is ours.

// ErrMarker is wrapped by errors about a malformed marker.
var ErrMarker = errors.New("malformed lachesis marker")

const keyLedger = "ledger_service_gpu_s"

// MarkerPrefix starts Lachesis's part of a job's SystemComment.
const MarkerPrefix = "lachesis:v1 "

// MarkerMax bounds the marker's length (the C side's buffer, 192 bytes
// with its NUL, is larger).
const MarkerMax = 184

// markerState is the pass's bookkeeping for markers; under mu.
type markerState struct {
	checked map[uint32]bool // jobs whose snapshot marker was compared since start
}

// marker is the part of a record the marker carries: what a restart cannot
// recompute from Slurm. The open run's length is not in it (it changes each
// pass); Slurm's start time gives it back while the job still runs.
type marker struct {
	closed, base, lastRun float64
	queue, runs, promos   int
	firstSubmit, runStart int64
	runGPUs               uint32
	// upgraded: when the job was upgraded from opportunistic to
	// guaranteed (priority.Account.Upgraded); written only when set, as
	// "up=", so markers of other jobs keep their old form.
	upgraded int64
}

func (m *markerState) init() {
	if m.checked == nil {
		*m = markerState{checked: map[uint32]bool{}}
	}
}

func markerOf(r *ledger.Record) marker {
	return marker{closed: r.ServiceClosed, base: r.ServiceBase, lastRun: r.LastRun,
		queue: r.Queue, runs: r.Runs, promos: r.Promotions,
		firstSubmit: r.FirstSubmit, runStart: r.RunStart, runGPUs: r.RunGPUs, upgraded: r.Upgraded}
}

func (m marker) String() string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	s := MarkerPrefix + "sc=" + f(m.closed) + " sb=" + f(m.base) + " lr=" + f(m.lastRun) +
		" q=" + strconv.Itoa(m.queue) + " r=" + strconv.Itoa(m.runs) + " p=" + strconv.Itoa(m.promos) +
		" fs=" + strconv.FormatInt(m.firstSubmit, 10) + " rs=" + strconv.FormatInt(m.runStart, 10) +
		" rg=" + strconv.FormatUint(uint64(m.runGPUs), 10)
	if m.upgraded != 0 {
		s += " up=" + strconv.FormatInt(m.upgraded, 10)
	}
	return s
}

// markerFor returns the marker to save in the job's SystemComment, or ""
// when Slurm already has it. Caller holds mu.
func (c *Core) markerFor(s *Snapshot, rec *ledger.Record) string {
	c.marks.init()
	m := markerOf(rec).String()
	// Compared with what the snapshot shows, not with what was last handed
	// out: an admin who rewrites SystemComment drops our part, and it must
	// come back at the next pass, not at the job's next change.
	if m == s.Marker || len(m) > MarkerMax {
		return ""
	}
	return m
}

// pruneMarkers forgets jobs slurmctld no longer has. Caller holds mu, at
// the end of a pass (c.seen is this pass's jobs).
func (c *Core) pruneMarkers() {
	for id := range c.marks.checked {
		if !c.seen[id] {
			delete(c.marks.checked, id)
		}
	}
}

// finiteNonNegative: NaN compares false with everything, so "< 0" alone
// would let it through into a job's service.
func finiteNonNegative(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return false
		}
	}
	return true
}
