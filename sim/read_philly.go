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
	t := &Trace{}
	var stamps []time.Time
	err := readRows(r, []string{"timestamp", "duration", "num_gpus", "cluster"}, func(row *row) error {
		ts, err := time.Parse("2006-01-02 15:04:05", row.field("timestamp"))
		if err != nil {
			return fmt.Errorf("%w: line %d: timestamp: %w", ErrBadTrace, row.line, err)
		}
		stamps = append(stamps, ts)
		t.Jobs = append(t.Jobs, Job{ID: uint32(len(t.Jobs) + 1), Duration: row.float("duration"),
			GPUs: row.int("num_gpus"), Cluster: row.field("cluster")})
		return nil
	})
	if err != nil {
		return nil, err
	}
	setWallClockSubmits(t, stamps)
	return t, t.normalise()
}
