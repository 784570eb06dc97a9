package localapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/lachesis-sched/lachesis/profiler"
)

// Caller is who is on the other end of the socket, from SO_PEERCRED.
type Caller struct {
	UID, GID uint32
	PID      int32
}

// Handler does what requests ask.
type Handler interface {
	// Profile runs a sweep for caller, reporting progress as it goes.
	Profile(ctx context.Context, caller Caller, req ProfileRequest, progress func(profiler.Progress)) (Result, error)
	// Status is the agent's state as caller may see it.
	Status(caller Caller) (Status, error)
}

// Log keys.
const (
	keyUID  = "uid"
	keyPID  = "pid"
	keyErr  = "err"
	keyPath = "path"
	keyOp   = "op"
)

// requestTimeout bounds reading a request; writeTimeout one event. Every
// connection is served by its own goroutine, so a request waiting for the
// node's sweep never holds up another's status. maxConnsPerUID bounds what
// one user holds open (queued profiles included), so one user cannot take
// every connection; maxConns bounds them all. Root is not capped per uid:
// slurmstepd reports every job end on the node as root, and a node ending
// more than maxConnsPerUID jobs at once must not lose the fifth.
const (
	requestTimeout = 10 * time.Second
	writeTimeout   = 10 * time.Second
	maxConns       = 256
	maxConnsPerUID = 4
)

// ErrTooManyConnections: the caller already holds maxConnsPerUID
// connections to the agent.
var ErrTooManyConnections = errors.New("too many connections")

// Server serves the socket.
type Server struct {
	path    string
	ln      *net.UnixListener
	handler Handler
	log     *slog.Logger
	slots   chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	perUID map[uint32]int
	closed bool
	wg     sync.WaitGroup
}

// Listen creates the socket at path (replacing a stale one left by a
// previous agent) with mode 0666, and serves it until Close.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	// Every user may ask; the agent runs the workload as whoever asked.
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("agent socket: %w", err)
	}
	s := &Server{path: path, ln: ln, handler: h, log: log, slots: make(chan struct{}, maxConns), conns: map[net.Conn]struct{}{}, perUID: map[uint32]int{}}
	s.wg.Add(1)
	go s.accept()
	log.Info("listening for lachesis-profiler", keyPath, path)
	return s, nil
}

// removeStale removes a socket file nobody listens on; a live one means
// another agent runs, which is an error.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent socket: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("agent socket: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("agent socket: another agent is listening on %s", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("agent socket: remove stale %s: %w", path, err)
	}
	return nil
}

// Close stops listening, removes the socket and cancels requests in
// progress (a running profile is cancelled, as if its CLI had gone).
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close() // also removes the socket file
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("accepting a CLI connection failed", keyErr, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		select {
		case s.slots <- struct{}{}:
		default:
			conn.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(conn)
	}
}

func (s *Server) serve(conn *net.UnixConn) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic serving a CLI request", keyErr, r)
		}
		conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		<-s.slots
		s.wg.Done()
	}()
	caller, err := peerCredentials(conn)
	if err != nil {
		s.log.Warn("cannot tell who is on the agent socket", keyErr, err)
		return
	}
	out := &eventWriter{conn: conn}
	s.mu.Lock()
	n := s.perUID[caller.UID]
	capped := caller.UID != 0 && n >= maxConnsPerUID
	if !capped {
		s.perUID[caller.UID]++
	}
	s.mu.Unlock()
	if capped {
		s.log.Warn("CLI connection refused: too many from one user", keyUID, caller.UID, keyPID, caller.PID)
		out.send(Event{Error: fmt.Sprintf("%v: uid %d already has %d requests open on this node's agent (at most %d at a time); wait for one to finish", ErrTooManyConnections, caller.UID, n, maxConnsPerUID)})
		return
	}
	defer func() {
		s.mu.Lock()
		if s.perUID[caller.UID]--; s.perUID[caller.UID] <= 0 {
			delete(s.perUID, caller.UID)
		}
		s.mu.Unlock()
	}()
	_ = conn.SetReadDeadline(time.Now().Add(requestTimeout))
	var req Request
	dec := json.NewDecoder(io.LimitReader(conn, maxRequestBytes))
	if err := dec.Decode(&req); err != nil {
		out.send(Event{Error: fmt.Sprintf("bad request: %v", err)})
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	s.log.Debug("CLI request", keyOp, req.Op, keyUID, caller.UID, keyPID, caller.PID)

	switch req.Op {
	case OpJobEnd:
		s.serveJobEnd(out, caller, req.JobEnd)
	case OpProgress:
		s.serveProgress(context.Background(), out, caller, req.Report, dec.InputOffset())
	case OpStatus:
		st, err := s.handler.Status(caller)
		if err != nil {
			out.send(Event{Error: err.Error()})
			return
		}
		out.send(Event{Status: &st})
	case OpProfile:
		if req.Profile == nil {
			out.send(Event{Error: "bad request: profile op without a profile"})
			return
		}
		// The CLI sends nothing after its request, so a read returns only
		// when it hangs up: that cancels the run.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, conn)
			cancel()
		}()
		res, err := s.handler.Profile(ctx, caller, *req.Profile, func(p profiler.Progress) { out.send(Event{Progress: &p}) })
		if err != nil {
			out.send(Event{Error: err.Error()})
			return
		}
		out.send(Event{Result: &res})
	default:
		out.send(Event{Error: fmt.Sprintf("bad request: unknown op %q", req.Op)})
	}
}

// eventWriter writes events one line each; after a failed write (a CLI
// that stopped reading) it drops the rest rather than block the run.
type eventWriter struct {
	mu     sync.Mutex
	conn   net.Conn
	broken bool
}

func (w *eventWriter) send(e Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		w.broken = true
		return
	}
	_ = w.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := w.conn.Write(append(b, '\n')); err != nil {
		w.broken = true
	}
}

// peerCredentials asks the kernel who connected (SO_PEERCRED).
func peerCredentials(conn *net.UnixConn) (Caller, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid}, nil
}
