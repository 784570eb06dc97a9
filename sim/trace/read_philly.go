package trace

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
	err := ReadCSV(r, []string{"timestamp", "duration", "num_gpus", "cluster"}, func(row *Row) error {
		ts, err := time.Parse("2006-01-02 15:04:05", row.Field("timestamp"))
		if err != nil {
			return fmt.Errorf("%w: line %d: timestamp: %w", ErrBadTrace, row.Line, err)
		}
		stamps = append(stamps, ts)
		t.Jobs = append(t.Jobs, Job{ID: uint32(len(t.Jobs) + 1), Duration: row.Float("duration"),
			GPUs: row.Int("num_gpus"), Cluster: row.Field("cluster")})
		return nil
	})
	if err != nil {
		return nil, err
	}
	setWallClockSubmits(t, stamps)
	return t, t.Normalise()
}
