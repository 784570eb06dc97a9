package agent

import (
	"time"

	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
)

var _ localapi.JobEndHandler = (*Agent)(nil)

// JobEnded implements localapi.JobEndHandler: the report is in the spool
// (synchronous=FULL) before slurmstepd is answered, then delivered.
func (a *Agent) JobEnded(_ localapi.Caller, req localapi.JobEndRequest) error {
	if err := a.spool.AddJobEnd(spool.JobEnd{JobID: req.JobID, End: req.End, Node: a.cfg.Node}, time.Now()); err != nil {
		return err
	}
	a.log.Info("job end spooled", "job_id", req.JobID, "end", req.End)
	a.forgetProgress(req.JobID)
	a.jobEnds.Kick()
	return nil
}
