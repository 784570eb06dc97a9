package deliver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Sentinel errors.
var (
	// ErrUnreachable: the controller could not be reached or hung up.
	ErrUnreachable = errors.New("controller unreachable")
	// ErrRefused: the controller answered with a negative ack.
	ErrRefused = errors.New("controller refused the report")
)

// Sender sends one report and returns the controller's ack.
type Sender interface {
	Send(ctx context.Context, t wire.Type, payload any) (wire.Ack, error)
}

// Client sends reports over TCP, one connection per report.
type Client struct {
	Addr          string
	Signer        wire.Signer
	Timeout       time.Duration // per attempt: connect, send, ack
	MaxFrameBytes int           // largest ack accepted
	// Dial defaults to a net.Dialer; tests replace it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

var _ Sender = (*Client)(nil)

// Send implements Sender. A negative ack wraps ErrRefused; failing to
// connect, send or read the ack wraps ErrUnreachable.
func (c *Client) Send(ctx context.Context, t wire.Type, payload any) (wire.Ack, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	frame, err := wire.EncodeReport(c.Signer, t, payload)
	if err != nil {
		return wire.Ack{}, err
	}
	dial := c.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", c.Addr)
	if err != nil {
		return wire.Ack{}, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	// A cancelled context unblocks the read below.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(frame); err != nil {
		return wire.Ack{}, fmt.Errorf("%w: send: %v", ErrUnreachable, err)
	}
	max := c.MaxFrameBytes
	if max <= 0 {
		max = wire.MaxAckBytes
	}
	ack, err := wire.ReadAck(conn, max)
	if err != nil {
		// %w twice: the caller (and its tests) can tell a hostile reply
		// (wire.ErrTooDeep, wire.ErrVersion) from a lost connection.
		return wire.Ack{}, fmt.Errorf("%w: no ack: %w", ErrUnreachable, err)
	}
	if !ack.OK {
		return ack, fmt.Errorf("%w: %s", ErrRefused, ack.Error)
	}
	return ack, nil
}
