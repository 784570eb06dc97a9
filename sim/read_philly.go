package sim

import (
	"fmt"
	"io"
	"time"
)

// ReadPhilly reads the Philly job table (header
// timestamp,duration,num_gpus,gpu_time,cluster). A job's ID is its data
// row's number, counting from 1, so it is stable under any selection.
// Timestamps are read as UTC.
func ReadPhilly(r io.Reader) (*Trace, error) {
	tab, err := newTable(r, []string{"timestamp", "duration", "num_gpus", "cluster"})
	if err != nil {
		return nil, err
	}
	t := &Trace{}
	var stamps []time.Time
	for row := uint32(1); ; row++ {
		rec, line, err := tab.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		ts, err := time.Parse("2006-01-02 15:04:05", tab.field(rec, "timestamp"))
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: timestamp: %w", ErrBadTrace, line, err)
		}
		dur, err := parseFloat(line, "duration", tab.field(rec, "duration"))
		if err != nil {
			return nil, err
		}
		gpus, err := parseInt(line, "num_gpus", tab.field(rec, "num_gpus"))
		if err != nil {
			return nil, err
		}
		stamps = append(stamps, ts)
		t.Jobs = append(t.Jobs, Job{ID: row, GPUs: gpus, Duration: dur, Cluster: tab.field(rec, "cluster")})
	}
	setWallClockSubmits(t, stamps)
	return t, t.normalise()
}
