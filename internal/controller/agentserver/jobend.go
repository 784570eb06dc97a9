package agentserver

import (
	"errors"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

const (
	keyJob = "job_id"
	keyEnd = "end"
)

// JobEndFunc takes a node's report that job ended at end (Unix seconds).
type JobEndFunc func(job uint32, end int64, node string)

// handleJobEnd passes a node's job-end report to the core. The report only
// ever lowers a charge (the core's rule), and it comes from a uid allowed
// to report, so it is acknowledged once valid; the core makes repeats
// harmless, so an agent that resends after a lost ack changes nothing.
func (s *Server) handleJobEnd(peer string, body []byte) (wire.Ack, bool) {
	var rep wire.JobEndReport
	if err := wire.Unmarshal(body, &rep); err != nil {
		return s.refuse(peer, bodyReason(err), err)
	}
	if err := rep.Validate(); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	if s.cfg.OnJobEnd == nil || !s.cfg.OnJobEnd(rep) {
		return s.refuse(peer, ReasonBusy, errors.New("no handler for job-end reports yet"))
	}
	s.log.Info("node reported a job's end", keyJob, rep.JobID, keyEnd, rep.End, keyNode, rep.Node, keyPeer, peer)
	return wire.Ack{ID: rep.AckID(), OK: true}, true
}

// SetJobEndHandler names who takes job-end reports (the core, once it is
// built); until then reports are refused as busy and their agents retry.
func (s *Service) SetJobEndHandler(f JobEndFunc) {
	if f == nil {
		s.onJobEnd.Store(nil)
		return
	}
	s.onJobEnd.Store(&f)
}

func (s *Service) jobEnd(rep wire.JobEndReport) bool {
	f := s.onJobEnd.Load()
	if f == nil {
		return false
	}
	(*f)(rep.JobID, rep.End, rep.Node)
	return true
}
