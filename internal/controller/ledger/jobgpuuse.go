package ledger

import (
	"database/sql"
	"fmt"
	"math"
)

// Per-job GPU use: what a job did with the GPUs it held, as node agents
// measured it (wire.JobUsageReport), summed up while it runs. Not to be
// confused with usage.go, which is each account's fair-share usage.

// MaxJobGPUUseRows bounds the job_gpu_use table: past it, the rows of the
// jobs seen longest ago go (a finished job's row is history, kept like
// the completed-job history until then).
const MaxJobGPUUseRows = 100_000

const jobGPUUseSchema = `
CREATE TABLE IF NOT EXISTS job_gpu_use (
	job_id         INTEGER PRIMARY KEY,
	user_id        INTEGER NOT NULL,
	samples        INTEGER NOT NULL,
	util_sum       REAL    NOT NULL,
	util_peak      REAL    NOT NULL,
	mem_peak_mb    REAL    NOT NULL,
	gpus_max       INTEGER NOT NULL,
	sharers_max    INTEGER NOT NULL,
	progress_samples INTEGER NOT NULL,
	ips_sum        REAL    NOT NULL,
	ips_last       REAL    NOT NULL,
	iters_last     INTEGER NOT NULL,
	first_seen     INTEGER NOT NULL,
	last_seen      INTEGER NOT NULL,
	idle_below_pct REAL    NOT NULL,
	idle_since     INTEGER NOT NULL,
	idle_peak      REAL    NOT NULL,
	finished       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS job_gpu_use_seen ON job_gpu_use(last_seen);
`

// JobGPUSample is one node's report of one job's GPUs over one interval.
type JobGPUSample struct {
	At        int64   // Unix seconds
	UtilPct   float64 // mean over the job's GPUs on that node, 0..100
	MemPeakMB float64 // the most memory the job held on one GPU
	GPUs      int
	Sharers   int // the most jobs on one of its GPUs, itself included
	// HasProgress: the job reported iterations; then Iterations and
	// ItersPerSec are its latest.
	HasProgress bool
	Iterations  uint64
	ItersPerSec float64
	// UtilUnknown: the agent knew none of the job's GPUs' utilisation
	// (wire.JobGPUUsage.UtilUnknown); UtilPct means nothing.
	UtilUnknown bool
}

// JobGPUUse is a job's running summary. Utilisation is averaged over
// samples (one per node and interval, each the mean over the job's GPUs
// there); peak is the highest such sample.
type JobGPUUse struct {
	JobID           uint32
	User            uint32
	Samples         int64
	UtilSum         float64
	UtilPeak        float64
	MemPeakMB       float64
	GPUsMax         int
	SharersMax      int
	ProgressSamples int64
	ItersPerSecSum  float64
	ItersPerSecLast float64
	IterationsLast  uint64
	FirstSeen       int64
	LastSeen        int64
	// IdleSince is when the samples last fell below IdleBelowPct and have
	// stayed there since (0: the last sample was at or above it); IdlePeak
	// is the highest sample since then.
	IdleBelowPct float64
	IdleSince    int64
	IdlePeak     float64
	Finished     int64 // when the controller saw the job end; 0 while it runs
}

// Fold adds one sample; idleBelow is usage.idle_below_pct, the threshold
// IdleSince is kept at (a new threshold restarts it). A sample whose
// utilisation is unknown counts for memory, sharers and progress, not in
// Samples or the utilisation figures, and ends an idle run: unknown is not
// idle.
func (u *JobGPUUse) Fold(s JobGPUSample, idleBelow float64) {
	if u.Samples == 0 && u.FirstSeen == 0 {
		u.FirstSeen = s.At
	}
	if !s.UtilUnknown {
		u.Samples++
		u.UtilSum += s.UtilPct
		u.UtilPeak = max(u.UtilPeak, s.UtilPct)
	}
	u.MemPeakMB = max(u.MemPeakMB, s.MemPeakMB)
	u.GPUsMax = max(u.GPUsMax, s.GPUs)
	u.SharersMax = max(u.SharersMax, s.Sharers)
	u.FirstSeen = min(u.FirstSeen, s.At)
	u.LastSeen = max(u.LastSeen, s.At)
	if s.HasProgress {
		u.ProgressSamples++
		u.ItersPerSecSum += s.ItersPerSec
		u.ItersPerSecLast = s.ItersPerSec
		u.IterationsLast = s.Iterations
	}
	if idleBelow != u.IdleBelowPct {
		u.IdleBelowPct, u.IdleSince, u.IdlePeak = idleBelow, 0, 0
	}
	switch {
	case s.UtilUnknown || s.UtilPct >= idleBelow:
		// Unknown is not idle: an idle run is measured idle throughout.
		u.IdleSince, u.IdlePeak = 0, 0
	case u.IdleSince == 0:
		u.IdleSince, u.IdlePeak = s.At, s.UtilPct
	default:
		u.IdlePeak = max(u.IdlePeak, s.UtilPct)
	}
}

// MeanUtil is the mean utilisation over the samples (0 with none).
func (u *JobGPUUse) MeanUtil() float64 {
	if u.Samples == 0 {
		return 0
	}
	return u.UtilSum / float64(u.Samples)
}

// MeanItersPerSec is the mean reported rate, NaN when the job reported
// none.
func (u *JobGPUUse) MeanItersPerSec() float64 {
	if u.ProgressSamples == 0 {
		return math.NaN()
	}
	return u.ItersPerSecSum / float64(u.ProgressSamples)
}

// IdleFor says how long, at now, the job has held its GPUs below
// IdleBelowPct (0 when it is not idle, or has finished).
func (u *JobGPUUse) IdleFor(now int64) int64 {
	if u.Finished != 0 || u.IdleSince == 0 || now < u.IdleSince {
		return 0
	}
	return now - u.IdleSince
}

// IdleAt is the idle rule asked at another threshold than the one the
// row tracks (IdleBelowPct), from what the row holds: at a higher one the
// job counts when it is idle at its own (a lower bound: a job between the
// two is not known); at a lower one, only if no sample since it fell idle
// reached below.
func (u *JobGPUUse) IdleAt(below float64, now, after int64) bool {
	if !u.Idle(now, after) {
		return false
	}
	return below >= u.IdleBelowPct || u.IdlePeak < below
}

// Idle is the idle rule: the job runs, and every sample of the last
// after seconds (at least one) was below its threshold.
func (u *JobGPUUse) Idle(now, after int64) bool {
	return u.IdleSince != 0 && u.Finished == 0 && now-u.IdleSince >= after
}

// JobGPUUseStore is implemented by stores that keep per-job GPU use; the
// core asks for it with a type assertion so other Stores need not.
type JobGPUUseStore interface {
	SaveJobGPUUse(rows []JobGPUUse) error
}

var _ JobGPUUseStore = (*SQLite)(nil)

const jobGPUUseColumns = `job_id, user_id, samples, util_sum, util_peak, mem_peak_mb, gpus_max, sharers_max,
	progress_samples, ips_sum, ips_last, iters_last, first_seen, last_seen, idle_below_pct, idle_since, idle_peak, finished`

// SaveJobGPUUse upserts rows in one transaction, then drops the rows seen
// longest ago beyond MaxJobGPUUseRows.
func (s *SQLite) SaveJobGPUUse(rows []JobGPUUse) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := s.conn().Begin()
	if err != nil {
		return fmt.Errorf("%w: begin: %v", ErrStore, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	ins, err := tx.Prepare(`INSERT OR REPLACE INTO job_gpu_use (` + jobGPUUseColumns + `)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("%w: prepare: %v", ErrStore, err)
	}
	defer ins.Close()
	for i := range rows {
		u := &rows[i]
		if _, err := ins.Exec(u.JobID, u.User, u.Samples, u.UtilSum, u.UtilPeak, u.MemPeakMB, u.GPUsMax, u.SharersMax,
			u.ProgressSamples, u.ItersPerSecSum, u.ItersPerSecLast, int64(min(u.IterationsLast, math.MaxInt64)),
			u.FirstSeen, u.LastSeen, u.IdleBelowPct, u.IdleSince, u.IdlePeak, u.Finished); err != nil {
			return fmt.Errorf("%w: save GPU use of job %d: %v", ErrStore, u.JobID, err)
		}
	}
	if _, err := tx.Exec(`DELETE FROM job_gpu_use WHERE job_id IN (
		SELECT job_id FROM job_gpu_use ORDER BY last_seen ASC
		LIMIT max(0, (SELECT count(*) FROM job_gpu_use) - ?))`, MaxJobGPUUseRows); err != nil {
		return fmt.Errorf("%w: bound job_gpu_use: %v", ErrStore, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: commit: %v", ErrStore, err)
	}
	return nil
}

// JobGPUUseLoader is implemented by stores that can give back the
// summaries of jobs still running (the core continues them at a restart).
type JobGPUUseLoader interface {
	ActiveJobGPUUse() ([]JobGPUUse, error)
}

var _ JobGPUUseLoader = (*SQLite)(nil)

// ActiveJobGPUUse returns the summaries of jobs not yet seen to finish.
func (s *SQLite) ActiveJobGPUUse() ([]JobGPUUse, error) {
	return s.queryJobGPUUse(`SELECT `+jobGPUUseColumns+` FROM job_gpu_use WHERE finished = 0 LIMIT ?`, MaxJobGPUUseRows)
}

// JobGPUUses returns up to limit jobs' summaries (0: all), those seen most
// recently first.
func (s *SQLite) JobGPUUses(limit int) ([]JobGPUUse, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return s.queryJobGPUUse(`SELECT `+jobGPUUseColumns+` FROM job_gpu_use ORDER BY last_seen DESC, job_id DESC LIMIT ?`, limit)
}

func (s *SQLite) queryJobGPUUse(query string, args ...any) ([]JobGPUUse, error) {
	rows, err := s.conn().Query(query, args...)
	if err != nil {
		return nil, fmt.Errorf("%w: load job GPU use: %v", ErrStore, err)
	}
	defer rows.Close()
	var out []JobGPUUse
	for rows.Next() {
		u, err := scanJobGPUUse(rows)
		if err != nil {
			return nil, fmt.Errorf("%w: scan job GPU use: %v", ErrStore, err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// JobGPUUseOf returns one job's summary.
func (s *SQLite) JobGPUUseOf(job uint32) (JobGPUUse, bool, error) {
	u, err := scanJobGPUUse(s.conn().QueryRow(`SELECT `+jobGPUUseColumns+` FROM job_gpu_use WHERE job_id = ?`, job))
	if err == sql.ErrNoRows {
		return JobGPUUse{}, false, nil
	}
	if err != nil {
		return JobGPUUse{}, false, fmt.Errorf("%w: GPU use of job %d: %v", ErrStore, job, err)
	}
	return u, true, nil
}

func scanJobGPUUse(row interface{ Scan(...any) error }) (JobGPUUse, error) {
	var u JobGPUUse
	var iters int64
	err := row.Scan(&u.JobID, &u.User, &u.Samples, &u.UtilSum, &u.UtilPeak, &u.MemPeakMB, &u.GPUsMax, &u.SharersMax,
		&u.ProgressSamples, &u.ItersPerSecSum, &u.ItersPerSecLast, &iters,
		&u.FirstSeen, &u.LastSeen, &u.IdleBelowPct, &u.IdleSince, &u.IdlePeak, &u.Finished)
	u.IterationsLast = uint64(max(iters, 0))
	return u, err
}
