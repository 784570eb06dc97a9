package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
)

// JobEndOutbox is the part of the spool the job-end deliverer uses.
type JobEndOutbox interface {
	PendingJobEnds(limit int) ([]spool.JobEnd, error)
	MarkJobEndDelivered(j spool.JobEnd, now time.Time) error
	MarkJobEndFailed(j spool.JobEnd, cause error) error
}

var _ JobEndOutbox = (*spool.Spool)(nil)

const keyJob = "job_id"

// JobEnds delivers spooled job-end reports, like Deliverer does profiles:
// oldest first, never giving up, backing off while the controller is down
// (which is exactly when these reports are written).
type JobEnds struct {
	outbox             JobEndOutbox
	sender             Sender
	log                *slog.Logger
	retryMin, retryMax time.Duration
	kick               chan struct{}
}

// NewJobEnds returns a JobEnds; Run starts it.
func NewJobEnds(outbox JobEndOutbox, sender Sender, retryMin, retryMax time.Duration, log *slog.Logger) *JobEnds {
	return &JobEnds{outbox: outbox, sender: sender, log: log, retryMin: retryMin, retryMax: retryMax, kick: make(chan struct{}, 1)}
}

// Kick asks for a round now (a report was spooled).
func (d *JobEnds) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is done.
func (d *JobEnds) Run(ctx context.Context) {
	backoff := d.retryMin
	for {
		wait := time.After(d.retryMax)
		if err := d.round(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			delay := jitter(backoff)
			d.log.Debug("job-end delivery failed; retrying", keyErr, err, keyRetryIn, delay)
			wait = time.After(delay)
			backoff = min(2*backoff, d.retryMax)
		} else {
			backoff = d.retryMin
		}
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-wait:
		}
	}
}

func (d *JobEnds) round(ctx context.Context) error {
	for {
		pending, err := d.outbox.PendingJobEnds(batch)
		if err != nil || len(pending) == 0 {
			return err
		}
		for _, j := range pending {
			rep := wire.JobEndReport{Node: j.Node, JobID: j.JobID, End: j.End}
			ack, err := d.sender.Send(ctx, wire.TypeJobEnd, &rep)
			if err == nil && ack.ID != rep.AckID() {
				err = fmt.Errorf("%w: ack names %q, not %q", ErrRefused, ack.ID, rep.AckID())
			}
			if err != nil {
				if merr := d.outbox.MarkJobEndFailed(j, err); merr != nil {
					d.log.Warn("spool", keyErr, merr)
				}
				return fmt.Errorf("end of job %d (attempt %d): %w", j.JobID, j.Attempts+1, err)
			}
			if err := d.outbox.MarkJobEndDelivered(j, time.Now()); err != nil {
				return err
			}
			d.log.Info("job end delivered", keyJob, j.JobID, "end", j.End, keyAttempts, j.Attempts+1)
		}
	}
}
