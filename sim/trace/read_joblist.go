package trace

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// ReadJobList reads Lachesis's plain job list, the format for feeding any
// other trace to the simulator:
//
//		# comment lines start with '#'
//		job_id,submit_time,gpus,duration,model
//		1,0,1,3600,res18
//		2,30.5,4,7200,
//
//	  - job_id: unique unsigned 32-bit integer.
//	  - submit_time: seconds (any origin; times are shifted so the first job
//	    is at 0), or a wall-clock time (RFC 3339, "2006-01-02T15:04:05" or
//	    "2006-01-02 15:04:05", UTC when no zone is given). All rows use the
//	    same kind.
//	  - gpus: GPUs the job needs, ≥ 1, or a share of one GPU below 1
//	    (0.25: a quarter of a GPU); a job of a share takes a whole GPU
//	    unless the simulation shares GPUs (sim.SharingConfig).
//	  - duration: run time in seconds at the GPU-proportional share of CPUs
//	    and memory, without queueing.
//	  - model (optional column, optional value): the model name, matched
//	    against the Synergy throughput table; empty means unknown.
//	  - class (optional column, optional value): guaranteed (the default)
//	    or opportunistic, the job's sharing class.
//
// Columns are found by name, so their order is free and extra columns are
// ignored.
func ReadJobList(r io.Reader) (*Trace, error) {
	t := &Trace{}
	var stamps []time.Time
	err := ReadCSV(r, []string{"job_id", "submit_time", "gpus", "duration"}, func(row *Row) error {
		job := Job{ID: row.ID("job_id"), Duration: row.Float("duration"), Model: row.Field("model")}
		if row.Err != nil {
			return row.Err
		}
		if job.GPUs, job.Share, row.Err = parseGPUs(row.Line, row.Field("gpus")); row.Err != nil {
			return row.Err
		}
		var err error
		if job.Class, err = sharing.ParseClass(row.Field("class")); err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrBadTrace, row.Line, err)
		}
		raw := row.Field("submit_time")
		if sec, err := strconv.ParseFloat(raw, 64); err == nil {
			if len(stamps) > 0 {
				return fmt.Errorf("%w: line %d: submit_time mixes seconds and wall-clock times", ErrBadTrace, row.Line)
			}
			job.Submit = sec
		} else {
			ts, err := parseWallClock(raw)
			if err != nil {
				return fmt.Errorf("%w: line %d: submit_time %q is neither seconds nor a wall-clock time", ErrBadTrace, row.Line, raw)
			}
			if len(stamps) != len(t.Jobs) {
				return fmt.Errorf("%w: line %d: submit_time mixes seconds and wall-clock times", ErrBadTrace, row.Line)
			}
			stamps = append(stamps, ts)
		}
		t.Jobs = append(t.Jobs, job)
		return nil
	})
	if err != nil {
		return nil, err
	}
	setWallClockSubmits(t, stamps)
	return t, t.Normalise()
}

// parseGPUs reads the gpus column: a whole count (as before shares
// existed, so old lists read the same) or a share of one GPU in (0, 1).
func parseGPUs(line int, s string) (gpus int, share float64, err error) {
	if n, ierr := parseInt(line, "gpus", s); ierr == nil {
		return n, 0, nil
	}
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr != nil || !(f > 0 && f < 1) {
		return 0, 0, fmt.Errorf("%w: line %d: gpus %q is neither a whole count nor a share of one GPU in (0, 1)", ErrBadTrace, line, s)
	}
	return 1, f, nil
}
