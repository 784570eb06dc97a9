package localapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/lachesis-sched/lachesis/profiler"
)

// dial connects to the agent, telling "not running" apart from other
// failures.
func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err == nil {
		return conn, nil
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w (nothing listens on %s; start it with `systemctl start lachesis-node-agent`)", ErrAgentNotRunning, socket)
	}
	if errors.Is(err, os.ErrPermission) {
		return nil, fmt.Errorf("%w: cannot connect to %s: permission denied", ErrAgent, socket)
	}
	return nil, fmt.Errorf("%w: %v", ErrAgent, err)
}

// call sends req and hands each event to fn until a final one.
func call(ctx context.Context, socket string, req Request, fn func(Event) (final bool, err error)) error {
	conn, err := dial(ctx, socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	sendErr := json.NewEncoder(conn).Encode(req)
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	if sendErr != nil {
		// The agent may have refused the connection before reading the
		// request (too many from this user): its reason is the better
		// error.
		if sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Error != "" {
				return fmt.Errorf("%w: %s", ErrAgent, e.Error)
			}
		}
		return fmt.Errorf("%w: send request: %v", ErrAgent, sendErr)
	}
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		if e.Error != "" {
			return fmt.Errorf("%w: %s", ErrAgent, e.Error)
		}
		final, err := fn(e)
		if err != nil || final {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrAgent, err)
	}
	return fmt.Errorf("%w: the agent hung up without an answer (see its log: journalctl -u lachesis-node-agent)", ErrAgent)
}

// Profile asks the agent at socket to profile req and calls progress with
// every progress event. Cancelling ctx cancels the run.
func Profile(ctx context.Context, socket string, req ProfileRequest, progress func(profiler.Progress)) (Result, error) {
	var res Result
	err := call(ctx, socket, Request{Op: OpProfile, Profile: &req}, func(e Event) (bool, error) {
		switch {
		case e.Progress != nil:
			if progress != nil {
				progress(*e.Progress)
			}
			return false, nil
		case e.Result != nil:
			res = *e.Result
			return true, nil
		}
		return false, fmt.Errorf("%w: unexpected event", ErrProtocol)
	})
	return res, err
}

// GetStatus asks the agent at socket for its state.
func GetStatus(ctx context.Context, socket string) (Status, error) {
	var st Status
	err := call(ctx, socket, Request{Op: OpStatus}, func(e Event) (bool, error) {
		if e.Status == nil {
			return false, fmt.Errorf("%w: unexpected event", ErrProtocol)
		}
		st = *e.Status
		return true, nil
	})
	return st, err
}
