package sim

import (
	"fmt"
	"io"
	"strconv"
	"time"
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
//	  - gpus: GPUs the job needs, ≥ 1.
//	  - duration: run time in seconds at the GPU-proportional share of CPUs
//	    and memory, without queueing.
//	  - model (optional column, optional value): the model name, matched
//	    against the Synergy throughput table; empty means unknown.
//
// Columns are found by name, so their order is free and extra columns are
// ignored.
func ReadJobList(r io.Reader) (*Trace, error) {
	tab, err := newTable(r, []string{"job_id", "submit_time", "gpus", "duration"})
	if err != nil {
		return nil, err
	}
	t := &Trace{}
	var stamps []time.Time
	for {
		rec, line, err := tab.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		id, err := parseID(line, "job_id", tab.field(rec, "job_id"))
		if err != nil {
			return nil, err
		}
		gpus, err := parseInt(line, "gpus", tab.field(rec, "gpus"))
		if err != nil {
			return nil, err
		}
		dur, err := parseFloat(line, "duration", tab.field(rec, "duration"))
		if err != nil {
			return nil, err
		}
		job := Job{ID: id, GPUs: gpus, Duration: dur, Model: tab.field(rec, "model")}
		raw := tab.field(rec, "submit_time")
		if sec, err := strconv.ParseFloat(raw, 64); err == nil {
			if len(stamps) > 0 {
				return nil, fmt.Errorf("%w: line %d: submit_time mixes seconds and wall-clock times", ErrBadTrace, line)
			}
			job.Submit = sec
		} else {
			ts, err := parseWallClock(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d: submit_time %q is neither seconds nor a wall-clock time", ErrBadTrace, line, raw)
			}
			if len(stamps) != len(t.Jobs) {
				return nil, fmt.Errorf("%w: line %d: submit_time mixes seconds and wall-clock times", ErrBadTrace, line)
			}
			stamps = append(stamps, ts)
		}
		t.Jobs = append(t.Jobs, job)
	}
	setWallClockSubmits(t, stamps)
	return t, t.normalise()
}
