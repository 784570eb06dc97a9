package agentserver

import (
	"errors"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// JobUsageFunc takes a node's per-job GPU usage report. It is called on
// the connection's goroutine and must not block on disk or network (the
// core folds the report into memory and leaves SQLite to its writer).
type JobUsageFunc func(rep *wire.JobUsageReport)

// handleJobUsage passes a node's per-job GPU usage to the core. The frame
// was authenticated like every other (munge, and only root, SlurmUser or
// agent.allowed_uids may send); the body is bounded by Validate. The
// report's entries are not trusted further here: the core keeps only
// those naming a job Slurm runs, owned by the uid the entry names.
func (s *Server) handleJobUsage(peer string, body []byte) (wire.Ack, bool) {
	var rep wire.JobUsageReport
	if err := wire.Unmarshal(body, &rep); err != nil {
		return s.refuse(peer, bodyReason(err), err)
	}
	if err := rep.Validate(); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	if s.cfg.OnJobUsage == nil || !s.cfg.OnJobUsage(&rep) {
		return s.refuse(peer, ReasonBusy, errors.New("no handler for job-usage reports yet"))
	}
	s.stats.jobUsage.Add(1)
	s.log.Debug("node reported its jobs' GPU use", keyNode, rep.Node, "jobs", len(rep.Jobs), keyPeer, peer)
	return wire.Ack{ID: rep.Node, OK: true}, true
}

// SetJobUsageHandler names who takes per-job GPU usage reports (the core);
// until then they are refused as busy and their agents retry.
func (s *Service) SetJobUsageHandler(f JobUsageFunc) {
	if f == nil {
		s.onJobUsage.Store(nil)
		return
	}
	s.onJobUsage.Store(&f)
}

func (s *Service) jobUsage(rep *wire.JobUsageReport) bool {
	f := s.onJobUsage.Load()
	if f == nil {
		return false
	}
	(*f)(rep)
	return true
}
