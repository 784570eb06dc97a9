package agentserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/safego"
	"github.com/lachesis-sched/lachesis/profile"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Log keys, constant so slurmctld's log can be grepped.
const (
	keyPeer   = "peer"
	keyReason = "reason"
	keyErr    = "err"
	keyUID    = "uid"
	keyModel  = "model"
	keyID     = "id"
	keyNode   = "node"
	keyAddr   = "addr"
	keyCount  = "suppressed"
	keyModels = "models"
	keyPath   = "path"
	keyEvery  = "every"
)

// Reason says why a connection or report was rejected. The values appear
// in logs and in Stats.
type Reason string

// Rejection reasons.
const (
	ReasonBadMagic       Reason = "bad_magic"
	ReasonBadVersion     Reason = "bad_version"
	ReasonBadType        Reason = "bad_type"
	ReasonReservedBits   Reason = "reserved_bits"
	ReasonTooLarge       Reason = "too_large"
	ReasonTruncated      Reason = "truncated"
	ReasonTimeout        Reason = "timeout"
	ReasonBadBody        Reason = "bad_body"
	ReasonBadCredential  Reason = "bad_credential"
	ReasonReplayed       Reason = "replayed_credential"
	ReasonExpired        Reason = "expired_credential"
	ReasonMungeDown      Reason = "munge_unavailable"
	ReasonDigestMismatch Reason = "digest_mismatch"
	ReasonUIDNotAllowed  Reason = "uid_not_allowed"
	ReasonInvalidReport  Reason = "invalid_report"
	ReasonStoreError     Reason = "store_error"
	ReasonConnLimit      Reason = "connection_limit"
	ReasonPanic          Reason = "panic"
)

// Store is where accepted reports go.
type Store interface {
	// Put stores a profile unless its ID is already stored.
	Put(rec profile.Record) (inserted bool, err error)
	PutTelemetry(rep wire.TelemetryReport) error
}

var _ Store = (*profilestore.Store)(nil)

// Config tunes a Server. Zero durations and limits take the defaults.
type Config struct {
	MaxFrameBytes int
	// SlurmUID and AllowedUIDs may report, besides root.
	SlurmUID    uint32
	AllowedUIDs []uint32
	// MaxConns caps concurrent agent connections; more are closed at once.
	MaxConns int
	// IdleTimeout is how long a connection may wait before its next frame
	// begins; FrameTimeout is how long one whole frame may take to arrive.
	IdleTimeout  time.Duration
	FrameTimeout time.Duration
	// WriteTimeout bounds sending an ack to a peer that does not read.
	WriteTimeout time.Duration
	// OnProfile is called (outside any lock) with each newly stored profile.
	OnProfile func(profile.Record)
	// LogsPerSecond caps rejection log lines; the excess is counted and
	// summarised, so a flood cannot fill slurmctld's log.
	LogsPerSecond int
}

// Defaults used for zero Config fields.
const (
	DefaultMaxConns      = 64
	DefaultIdleTimeout   = 30 * time.Second
	DefaultFrameTimeout  = 30 * time.Second
	DefaultWriteTimeout  = 10 * time.Second
	DefaultLogsPerSecond = 20
)

// ConfigFrom makes a Config from lachesis.yaml's agent section.
func ConfigFrom(a config.Agent, slurmUID uint32) Config {
	return Config{MaxFrameBytes: a.MaxFrameBytes, SlurmUID: slurmUID, AllowedUIDs: a.AllowedUIDs}
}

func (c *Config) fillDefaults() {
	if c.MaxFrameBytes <= 0 {
		c.MaxFrameBytes = config.Default().Agent.MaxFrameBytes
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.LogsPerSecond <= 0 {
		c.LogsPerSecond = DefaultLogsPerSecond
	}
}

// Server accepts node-agent connections.
type Server struct {
	cfg      Config
	allowed  map[uint32]bool
	verifier munge.Verifier
	store    Store
	log      *slog.Logger
	ln       net.Listener
	slots    chan struct{}
	limiter  *logLimiter

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	wg        sync.WaitGroup
	quit      chan struct{} // closed by Close
	closeOnce sync.Once
	stats     stats
}

// Start listens on addr (host:port; port 0 picks one) and serves until
// Close or until ctx is done.
func Start(ctx context.Context, addr string, cfg Config, verifier munge.Verifier, store Store, log *slog.Logger) (*Server, error) {
	cfg.fillDefaults()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent listener: %w", err)
	}
	s := &Server{
		cfg:      cfg,
		allowed:  map[uint32]bool{0: true, cfg.SlurmUID: true},
		verifier: verifier,
		store:    store,
		log:      log,
		ln:       ln,
		slots:    make(chan struct{}, cfg.MaxConns),
		limiter:  newLogLimiter(cfg.LogsPerSecond),
		conns:    map[net.Conn]struct{}{},
		quit:     make(chan struct{}),
	}
	for _, u := range cfg.AllowedUIDs {
		s.allowed[u] = true
	}
	s.wg.Add(2)
	safego.Loop(log, "node-agent accept loop", s.acceptLoop, s.wg.Done)
	safego.Loop(log, "node-agent rejection summary", s.summariseSuppressed, s.wg.Done)
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				s.Close()
			case <-s.quit:
			}
		}()
	}
	log.Info("listening for node agents", keyAddr, ln.Addr().String())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops accepting, drops every open connection and waits for their
// goroutines to end.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.quit)
		s.mu.Lock()
		s.closed = true
		err = s.ln.Close()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.limiter.flush(s.log)
	})
	return err
}

// summariseSuppressed logs, once a second, how many rejections the rate
// limit kept out of the log, so a flood is visible even after it stops.
func (s *Server) summariseSuppressed() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.limiter.flush(s.log)
		}
	}
}

func (s *Server) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, as net/http does.
			s.log.Warn("accepting an agent connection failed", keyErr, err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case s.slots <- struct{}{}:
		default:
			s.reject(conn.RemoteAddr().String(), ReasonConnLimit,
				fmt.Errorf("%d connections open", s.cfg.MaxConns))
			conn.Close()
			continue
		}
		if !s.track(conn) {
			conn.Close()
			<-s.slots
			return
		}
		s.wg.Add(1)
		go s.serve(conn)
	}
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// serve handles one connection: frames until the peer closes, a deadline
// passes, or a frame is rejected.
func (s *Server) serve(conn net.Conn) {
	peer := conn.RemoteAddr().String()
	defer func() {
		if r := recover(); r != nil {
			s.reject(peer, ReasonPanic, fmt.Errorf("%v\n%s", r, debug.Stack()))
		}
		conn.Close()
		s.untrack(conn)
		<-s.slots
		s.wg.Done()
	}()
	s.stats.conns.Add(1)
	for {
		// Waiting for a frame and receiving it have separate bounds: a quiet
		// agent may idle, but no frame may trickle in byte by byte.
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		var first [1]byte
		if _, err := io.ReadFull(conn, first[:]); err != nil {
			if !errors.Is(err, io.EOF) && !isClosed(err) {
				s.reject(peer, frameReason(err), err)
			}
			return
		}
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.FrameTimeout))
		f, err := wire.ReadFrame(io.MultiReader(bytes.NewReader(first[:]), conn), s.cfg.MaxFrameBytes)
		if err != nil {
			if !isClosed(err) {
				s.reject(peer, frameReason(err), err)
			}
			return
		}
		ack, keep := s.handle(peer, f)
		_ = conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if err := wire.WriteAck(conn, ack); err != nil {
			s.log.Debug("could not ack an agent report", keyPeer, peer, keyErr, err)
			return
		}
		if !keep {
			return
		}
	}
}

// isClosed: the server closed the connection (shutting down).
func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// handle checks and stores one report. keep says whether the connection
// may carry on; any rejection ends it.
func (s *Server) handle(peer string, f wire.Frame) (ack wire.Ack, keep bool) {
	if f.Type == wire.TypeAck {
		return s.refuse(peer, ReasonBadType, fmt.Errorf("%w: agents do not send acks", wire.ErrType))
	}
	env, err := wire.DecodeReport(f)
	if err != nil {
		return s.refuse(peer, ReasonBadBody, err)
	}
	cred, err := s.verifier.Verify(env.Cred)
	if err != nil {
		return s.refuse(peer, credentialReason(err), err)
	}
	if subtle.ConstantTimeCompare(cred.Payload, wire.Digest(f.Type, env.Body)) != 1 {
		return s.refuse(peer, ReasonDigestMismatch, errors.New("the credential was not made for this report"))
	}
	if !s.allowed[cred.UID] {
		s.reject(peer, ReasonUIDNotAllowed, fmt.Errorf("uid %d may not report (root, SlurmUser %d or agent.allowed_uids)", cred.UID, s.cfg.SlurmUID), keyUID, cred.UID)
		return wire.Ack{Error: string(ReasonUIDNotAllowed)}, false
	}
	switch f.Type {
	case wire.TypeProfile:
		return s.handleProfile(peer, env.Body)
	default:
		return s.handleTelemetry(peer, env.Body)
	}
}

func (s *Server) handleProfile(peer string, body []byte) (wire.Ack, bool) {
	var rep wire.ProfileReport
	if err := wire.Unmarshal(body, &rep); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	if err := rep.Validate(); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	rec := rep.Record
	inserted, err := s.store.Put(rec)
	if err != nil {
		ack, keep := s.refuse(peer, ReasonStoreError, err)
		ack.ID = rec.ID
		return ack, keep
	}
	if inserted {
		s.stats.profiles.Add(1)
		s.log.Info("profile stored", keyModel, rec.Model, keyID, rec.ID, keyNode, rec.Node, keyPeer, peer)
		if s.cfg.OnProfile != nil {
			s.cfg.OnProfile(rec)
		}
	} else {
		s.stats.duplicates.Add(1)
		s.log.Info("profile already stored; acknowledged again", keyModel, rec.Model, keyID, rec.ID, keyPeer, peer)
	}
	return wire.Ack{ID: rec.ID, OK: true, Duplicate: !inserted}, true
}

func (s *Server) handleTelemetry(peer string, body []byte) (wire.Ack, bool) {
	var rep wire.TelemetryReport
	if err := wire.Unmarshal(body, &rep); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	if err := rep.Validate(); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	if err := s.store.PutTelemetry(rep); err != nil {
		return s.refuse(peer, ReasonStoreError, err)
	}
	s.stats.telemetry.Add(1)
	return wire.Ack{ID: rep.Node, OK: true}, true
}

// refuse records a rejection and builds the ack that tells the peer why.
func (s *Server) refuse(peer string, r Reason, err error) (wire.Ack, bool) {
	s.reject(peer, r, err)
	return wire.Ack{Error: string(r)}, false
}

// reject counts and logs one rejection.
func (s *Server) reject(peer string, r Reason, err error, extra ...any) {
	s.stats.add(r)
	if s.limiter.allow(s.log) {
		args := append([]any{keyPeer, peer, keyReason, string(r), keyErr, err}, extra...)
		s.log.Warn("agent report rejected", args...)
	}
}

func frameReason(err error) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, wire.ErrBadMagic):
		return ReasonBadMagic
	case errors.Is(err, wire.ErrVersion):
		return ReasonBadVersion
	case errors.Is(err, wire.ErrType):
		return ReasonBadType
	case errors.Is(err, wire.ErrReserved):
		return ReasonReservedBits
	case errors.Is(err, wire.ErrTooLarge):
		return ReasonTooLarge
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return ReasonTimeout
	}
	return ReasonTruncated
}

func credentialReason(err error) Reason {
	switch {
	case errors.Is(err, munge.ErrReplayed):
		return ReasonReplayed
	case errors.Is(err, munge.ErrExpired), errors.Is(err, munge.ErrRewound):
		return ReasonExpired
	case errors.Is(err, munge.ErrSocket), errors.Is(err, munge.ErrNoCgo):
		return ReasonMungeDown
	}
	return ReasonBadCredential
}

// Stats is a snapshot of the server's counters.
type Stats struct {
	Connections uint64
	Profiles    uint64 // newly stored
	Duplicates  uint64 // already stored, acknowledged again
	Telemetry   uint64
	Rejections  map[Reason]uint64
}

type stats struct {
	conns, profiles, duplicates, telemetry atomic.Uint64
	mu                                     sync.Mutex
	rejections                             map[Reason]uint64
}

func (st *stats) add(r Reason) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.rejections == nil {
		st.rejections = map[Reason]uint64{}
	}
	st.rejections[r]++
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := Stats{
		Connections: s.stats.conns.Load(),
		Profiles:    s.stats.profiles.Load(),
		Duplicates:  s.stats.duplicates.Load(),
		Telemetry:   s.stats.telemetry.Load(),
		Rejections:  map[Reason]uint64{},
	}
	for k, v := range s.stats.rejections {
		out.Rejections[k] = v
	}
	return out
}

// logLimiter lets through perSecond log lines per second and counts the
// rest, reporting the count with the next line it lets through.
type logLimiter struct {
	perSecond  int
	mu         sync.Mutex
	window     time.Time
	used       int
	suppressed int
}

func newLogLimiter(perSecond int) *logLimiter { return &logLimiter{perSecond: perSecond} }

func (l *logLimiter) allow(log *slog.Logger) bool {
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.window) >= time.Second {
		l.window, l.used = now, 0
	}
	if l.used >= l.perSecond {
		l.suppressed++
		l.mu.Unlock()
		return false
	}
	l.used++
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		log.Warn("agent rejections not logged individually (rate limit)", keyCount, n)
	}
	return true
}

func (l *logLimiter) flush(log *slog.Logger) {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		log.Warn("agent rejections not logged individually (rate limit)", keyCount, n)
	}
}
