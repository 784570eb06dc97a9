package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
)

// Outbox is the part of the spool the deliverer uses.
type Outbox interface {
	Pending(limit int) ([]spool.Entry, error)
	MarkDelivered(id string, duplicate bool) error
	MarkFailed(id string, cause error) error
	MarkRefused(id string, cause error) error
}

var _ Outbox = (*spool.Spool)(nil)

// Log keys.
const (
	keyModel    = "model"
	keyID       = "id"
	keyErr      = "err"
	keyAttempts = "attempts"
	keyRetryIn  = "retry_in"
	keyDup      = "duplicate"
)

// batch is how many pending profiles one round reads.
const batch = 100

// Deliverer sends pending profiles until each is acknowledged.
type Deliverer struct {
	outbox   Outbox
	sender   Sender
	log      *slog.Logger
	retryMin time.Duration
	retryMax time.Duration
	kick     chan struct{}
	// delivered is signalled after each round that delivered something
	// (tests wait on it).
	delivered chan struct{}
}

// New returns a Deliverer; Run starts it.
func New(outbox Outbox, sender Sender, retryMin, retryMax time.Duration, log *slog.Logger) *Deliverer {
	return &Deliverer{
		outbox: outbox, sender: sender, log: log,
		retryMin: retryMin, retryMax: retryMax,
		kick:      make(chan struct{}, 1),
		delivered: make(chan struct{}, 1),
	}
}

// Kick asks for a delivery round now (a new profile was spooled).
func (d *Deliverer) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is done. It never gives up on a profile: while
// the controller is down or refuses, it retries with backoff doubling from
// retryMin to retryMax (with jitter, so a rack of agents does not retry in
// step after an outage).
func (d *Deliverer) Run(ctx context.Context) {
	backoff := d.retryMin
	outage := false
	for {
		err := d.round(ctx)
		var wait <-chan time.Time
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if outage {
				d.log.Info("controller reachable again; spooled profiles delivered")
			}
			outage, backoff = false, d.retryMin
		default:
			delay := jitter(backoff)
			if !outage {
				d.log.Warn("profile delivery failed; profiles wait in the spool and are retried", keyErr, err, keyRetryIn, delay)
			} else {
				d.log.Debug("profile delivery failed again", keyErr, err, keyRetryIn, delay)
			}
			outage = true
			wait = time.After(delay)
			backoff = min(2*backoff, d.retryMax)
		}
		// Even when all is delivered, look again now and then: a profile
		// spooled by a previous agent process needs no kick to be found.
		if wait == nil {
			wait = time.After(d.retryMax)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-wait:
		}
	}
}

// round sends every pending profile, oldest first, stopping at the first
// failure (the controller is probably down; later ones would fail too).
func (d *Deliverer) round(ctx context.Context) error {
	sent := false
	defer func() {
		if sent {
			select {
			case d.delivered <- struct{}{}:
			default:
			}
		}
	}()
	for {
		pending, err := d.outbox.Pending(batch)
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		for _, e := range pending {
			if err := d.deliver(ctx, e); err != nil {
				return err
			}
			sent = true
		}
	}
}

func (d *Deliverer) deliver(ctx context.Context, e spool.Entry) error {
	rec := e.Record
	ack, err := d.sender.Send(ctx, wire.TypeProfile, &wire.ProfileReport{Record: rec})
	if err == nil && ack.ID != rec.ID {
		err = fmt.Errorf("%w: ack names %q, not %q", ErrRefused, ack.ID, rec.ID)
	}
	if err != nil && ack.Final && errors.Is(err, ErrRefused) {
		// A quota of the controller: sending it again cannot help, and
		// must not hold up the profiles spooled after it.
		if merr := d.outbox.MarkRefused(rec.ID, err); merr != nil {
			return errors.Join(err, merr)
		}
		d.log.Warn("profile refused by the controller for good; not sent again", keyModel, rec.Model, keyID, rec.ID, keyErr, err)
		return nil
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if merr := d.outbox.MarkFailed(rec.ID, err); merr != nil {
			return errors.Join(err, merr)
		}
		return fmt.Errorf("profile %s of %s (attempt %d): %w", rec.ID, rec.Model, e.Attempts+1, err)
	}
	if err := d.outbox.MarkDelivered(rec.ID, ack.Duplicate); err != nil {
		// Delivered but not marked: it will be sent again and acked as a
		// duplicate, which is harmless.
		return err
	}
	d.log.Info("profile delivered", keyModel, rec.Model, keyID, rec.ID, keyDup, ack.Duplicate, keyAttempts, e.Attempts+1)
	return nil
}

// Delivered is signalled after a round that delivered at least one profile.
func (d *Deliverer) Delivered() <-chan struct{} { return d.delivered }

// jitter spreads d over [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}
