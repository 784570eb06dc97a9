package localapi

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// OpJobEnd tells the agent that a job ended on this node. The SPANK plugin
// slurmd-spank/lachesis_jobend.c sends it from slurmstepd (root) when a
// batch script exits: slurmctld learns of an end only when it receives the
// completion, so after a controller outage its end time is the restart
// (and the Epilog, which slurmctld triggers, runs only then too); the
// agent spools this report and delivers it so the controller can correct
// the job's charged GPU time.
const OpJobEnd = "job_end"

// JobEndRequest names the job and when it ended (Unix seconds).
type JobEndRequest struct {
	JobID uint32 `json:"job_id"`
	End   int64  `json:"end"`
}

// JobEndHandler is implemented by handlers that take job-end reports; a
// Handler without it answers OpJobEnd with an error.
type JobEndHandler interface {
	JobEnded(caller Caller, req JobEndRequest) error
}

// ErrNotAllowed: the caller may not make this request.
var ErrNotAllowed = errors.New("not allowed")

// mayReportJobEnd: only root (slurmstepd, where the SPANK plugin runs) and the
// agent's own user may say a job ended. Anyone else could otherwise lower
// another user's charged GPU time; the controller only ever lowers a
// charge to the job's true end, but a user must not choose that end.
func mayReportJobEnd(uid uint32) bool {
	return uid == 0 || uid == uint32(os.Getuid())
}

func (s *Server) serveJobEnd(out *eventWriter, caller Caller, req *JobEndRequest) {
	if !mayReportJobEnd(caller.UID) {
		s.log.Warn("job-end report refused: caller is not root", keyUID, caller.UID, keyPID, caller.PID)
		out.send(Event{Error: fmt.Sprintf("%v: only root (slurmstepd) may report a job's end, not uid %d", ErrNotAllowed, caller.UID)})
		return
	}
	if req == nil || req.JobID == 0 || req.End <= 0 {
		out.send(Event{Error: "bad request: job_end needs a job id and an end time"})
		return
	}
	h, ok := s.handler.(JobEndHandler)
	if !ok {
		out.send(Event{Error: "this agent does not take job-end reports"})
		return
	}
	if err := h.JobEnded(caller, *req); err != nil {
		out.send(Event{Error: err.Error()})
		return
	}
	out.send(Event{JobEnd: req})
}

// ReportJobEnd tells the agent at socket that job ended at end.
func ReportJobEnd(ctx context.Context, socket string, job uint32, end int64) error {
	return call(ctx, socket, Request{Op: OpJobEnd, JobEnd: &JobEndRequest{JobID: job, End: end}}, func(e Event) (bool, error) {
		if e.JobEnd == nil || e.JobEnd.JobID != job {
			return false, fmt.Errorf("%w: unexpected event", ErrProtocol)
		}
		return true, nil
	})
}
