package core

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/policy/priority"
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

// parseMarker reads a marker written by String; anything else is an error
// (an admin's text that merely looks like one must not become service).
func parseMarker(s string) (marker, error) {
	var m marker
	body, ok := strings.CutPrefix(s, MarkerPrefix)
	if !ok {
		return m, fmt.Errorf("%w: no prefix", ErrMarker)
	}
	var seen int
	for _, kv := range strings.Fields(body) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return m, fmt.Errorf("%w: %q", ErrMarker, kv)
		}
		var err error
		switch k {
		case "sc":
			m.closed, err = strconv.ParseFloat(v, 64)
		case "sb":
			m.base, err = strconv.ParseFloat(v, 64)
		case "lr":
			m.lastRun, err = strconv.ParseFloat(v, 64)
		case "q":
			m.queue, err = strconv.Atoi(v)
		case "r":
			m.runs, err = strconv.Atoi(v)
		case "p":
			m.promos, err = strconv.Atoi(v)
		case "fs":
			m.firstSubmit, err = strconv.ParseInt(v, 10, 64)
		case "rs":
			m.runStart, err = strconv.ParseInt(v, 10, 64)
		case "rg":
			var g uint64
			g, err = strconv.ParseUint(v, 10, 32)
			m.runGPUs = uint32(g)
		case "up":
			m.upgraded, err = strconv.ParseInt(v, 10, 64)
			if err == nil && m.upgraded < 0 {
				err = errors.New("negative")
			}
			seen-- // optional: not one of the nine every marker has
		default:
			continue // a later version's field
		}
		if err != nil {
			return m, fmt.Errorf("%w: %s: %v", ErrMarker, k, err)
		}
		seen++
	}
	if seen < 9 || !finiteNonNegative(m.closed, m.base, m.lastRun) || m.queue < 0 || m.runs < 0 || m.promos < 0 {
		return m, fmt.Errorf("%w: incomplete or negative: %q", ErrMarker, s)
	}
	return m, nil
}

// restoreFromMarker, the first time a pass sees a job after start, takes
// the job's record from the marker Slurm saved with it when that shows
// more closed service than the ledger has: the ledger lost writes. Caller
// holds mu, before observe.
func (c *Core) restoreFromMarker(s *Snapshot) {
	c.marks.init()
	if c.marks.checked[s.ID] {
		return
	}
	c.marks.checked[s.ID] = true
	if s.Marker == "" || s.State == StateFinished {
		return
	}
	m, err := parseMarker(s.Marker)
	if err != nil {
		c.log.Warn("ignoring the job's Lachesis marker", keyJob, s.ID, keyErr, err)
		return
	}
	rec := c.records[s.ID]
	if rec != nil && rec.Upgraded == 0 && m.upgraded != 0 {
		// The ledger lost the upgrade: the job stays guaranteed.
		rec.Upgraded = m.upgraded
		c.markDirty(rec)
		c.log.Warn("restored the job's upgrade to guaranteed from its saved SystemComment; the ledger had lost it", keyJob, s.ID)
	}
	if rec != nil && rec.ServiceClosed >= m.closed {
		return
	}
	had := 0.0
	if rec == nil {
		rec = &ledger.Record{JobID: s.ID, Account: priority.NewAccount(s.SubmitTime)}
		c.records[s.ID] = rec
	} else {
		had = rec.ServiceClosed
	}
	rec.ServiceClosed, rec.ServiceBase, rec.LastRun = m.closed, m.base, m.lastRun
	rec.Queue, rec.Runs, rec.Promotions = m.queue, m.runs, m.promos
	rec.Upgraded = max(rec.Upgraded, m.upgraded)
	if m.firstSubmit != 0 {
		rec.FirstSubmit = m.firstSubmit
	}
	if rec.RunStart != m.runStart {
		// The open run the marker knew (none when its start is 0: Slurm
		// never starts a job at time 0); observe goes on from Slurm's view.
		rec.RunOpen = m.runStart != 0
		rec.RunStart, rec.RunGPUs, rec.RunSeconds = m.runStart, m.runGPUs, 0
	}
	c.markDirty(rec)
	c.log.Warn("restored attained service from the job's saved SystemComment; the ledger had lost writes",
		keyJob, s.ID, keyService, rec.Total(), keyLedger, had, keyQueue, rec.Queue)
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
