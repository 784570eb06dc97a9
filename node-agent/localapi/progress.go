package localapi

import (
	"context"
	"fmt"
)

// OpProgress is a job's training loop saying how many iterations it has
// done (etc/lachesis_progress.py; issue 22 item 2). The request carries a
// count and nothing else that is believed: which job it is for is derived
// by the handler from the calling process (SO_PEERCRED's pid and uid), so
// a field naming a job is ignored like any unknown field.
const OpProgress = "progress"

// maxProgressRequestBytes bounds a progress request: {"op":"progress",
// "report":{"iterations":18446744073709551615}} is 62 bytes. Anything much
// larger is not the helper's and is refused.
const maxProgressRequestBytes = 1024

// ProgressReport is a running count of the caller's iterations.
type ProgressReport struct {
	Iterations uint64 `json:"iterations"`
}

// ProgressAnswer answers OpProgress: the job the agent attributed the
// count to, and the job's rate after it (0 until it has one).
type ProgressAnswer struct {
	JobID       uint32  `json:"job_id"`
	Iterations  uint64  `json:"iterations"`
	ItersPerSec float64 `json:"iters_per_s"`
}

// ProgressHandler is implemented by handlers that take progress reports; a
// Handler without it answers OpProgress with an error.
type ProgressHandler interface {
	ReportProgress(ctx context.Context, caller Caller, rep ProgressReport) (ProgressAnswer, error)
}

func (s *Server) serveProgress(ctx context.Context, out *eventWriter, caller Caller, rep *ProgressReport, size int64) {
	if size > maxProgressRequestBytes {
		out.send(Event{Error: fmt.Sprintf("bad request: a progress report of %d bytes (at most %d)", size, maxProgressRequestBytes)})
		return
	}
	if rep == nil {
		out.send(Event{Error: "bad request: progress op without a report"})
		return
	}
	h, ok := s.handler.(ProgressHandler)
	if !ok {
		out.send(Event{Error: "this agent does not take progress reports"})
		return
	}
	ans, err := h.ReportProgress(ctx, caller, *rep)
	if err != nil {
		out.send(Event{Error: err.Error()})
		return
	}
	out.send(Event{Iterations: &ans})
}

// ReportProgress tells the agent at socket that the calling process's job
// has done iters iterations.
func ReportProgress(ctx context.Context, socket string, iters uint64) (ProgressAnswer, error) {
	var ans ProgressAnswer
	err := call(ctx, socket, Request{Op: OpProgress, Report: &ProgressReport{Iterations: iters}}, func(e Event) (bool, error) {
		if e.Iterations == nil {
			return false, fmt.Errorf("%w: unexpected event", ErrProtocol)
		}
		ans = *e.Iterations
		return true, nil
	})
	return ans, err
}
