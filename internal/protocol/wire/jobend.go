package wire

import (
	"fmt"
	"strconv"
)

// JobEndReport says when a job really ended on a node (frame type
// TypeJobEnd). Slurm 22.05's completion messages carry no time, so after a
// controller outage slurmctld's end is its restart; the node's slurmstepd
// knows better, and the controller uses this report to lower, never raise,
// the job's charged GPU time.
type JobEndReport struct {
	Node  string `codec:"node"`
	JobID uint32 `codec:"job"`
	End   int64  `codec:"end"` // Unix seconds
}

// MaxEndUnix bounds a report's end (the year 9999): beyond it a time is
// garbage, and arithmetic on it could overflow.
const MaxEndUnix = 253402300799

// Validate rejects a report that names no node or job, or no plausible
// time.
func (j *JobEndReport) Validate() error {
	if err := checkName("node", j.Node, MaxNameLen); err != nil {
		return err
	}
	if j.JobID == 0 {
		return fmt.Errorf("%w: job id 0", ErrBody)
	}
	if j.End <= 0 || j.End > MaxEndUnix {
		return fmt.Errorf("%w: end %d outside 1..%d", ErrBody, j.End, MaxEndUnix)
	}
	return nil
}

// AckID is the ID an ack of this report carries: job and node, so the
// agent can tell which spooled report it answers.
func (j *JobEndReport) AckID() string {
	return strconv.FormatUint(uint64(j.JobID), 10) + "@" + j.Node
}
