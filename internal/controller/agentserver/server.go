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
	"runtime/debug"
	"sync"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/safego"
	"github.com/lachesis-sched/lachesis/profile"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Store is where accepted reports go.
type Store interface {
	// Put stores a profile unless its ID is already stored.
	Put(rec profile.Record) (inserted bool, err error)
	// Has says whether a profile ID is stored (a retry of one a quota
	// would now refuse is acknowledged as a duplicate).
	Has(id string) (bool, error)
	// ProfileCounts counts stored profiles: what the quotas start from.
	ProfileCounts() ([]profilestore.ProfileCount, error)
	PutTelemetry(rep wire.TelemetryReport) error
}

var _ Store = (*profilestore.Store)(nil)

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
	bodies   *budget       // bytes of bodies in memory
	decoders chan struct{} // decodes at once; each may take a few MB

	// storeMu serialises a profile's quota check, store and count, so
	// two reports cannot both take a quota's last place.
	storeMu sync.Mutex
	quota   *quota

	mu      sync.Mutex
	conns   map[net.Conn]*connState
	perPeer map[string]int // open connections by source IP
	closed  bool

	wg        sync.WaitGroup
	quit      chan struct{} // closed by Close
	closeOnce sync.Once
	stats     stats
}

// Start listens on addr (host:port; port 0 picks one) and serves until
// Close or until ctx is done.
func Start(ctx context.Context, addr string, cfg Config, verifier munge.Verifier, store Store, log *slog.Logger) (*Server, error) {
	cfg.fillDefaults()
	stored, err := store.ProfileCounts()
	if err != nil {
		return nil, fmt.Errorf("agent listener: %w", err)
	}
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
		bodies:   newBudget(cfg.BodyBudget),
		decoders: make(chan struct{}, maxDecoders),
		conns:    map[net.Conn]*connState{},
		perPeer:  map[string]int{},
		quit:     make(chan struct{}),
		quota:    newQuota(cfg.Quotas, stored),
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
		peer := conn.RemoteAddr().String()
		// The first frame's header and credential are due AuthTimeout
		// after accept, whatever the peer does.
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.AuthTimeout))
		ip := peerIP(conn.RemoteAddr())
		st, res := s.track(conn, ip)
		switch res {
		case trackClosed:
			conn.Close()
			return
		case trackPeerFull:
			s.reject(peer, ReasonPeerLimit, fmt.Errorf("%d connections open from %s", s.cfg.MaxConnsPerPeer, ip))
			conn.Close()
			continue
		}
		if !s.takeSlot(st) {
			s.untrack(conn)
			s.reject(peer, ReasonConnLimit, fmt.Errorf("%d connections open, none of them evictable (each authenticated, being verified or not yet read)", s.cfg.MaxConns))
			conn.Close()
			continue
		}
		s.wg.Add(1)
		go s.serve(conn, st)
	}
}

const (
	tracked trackResult = iota
	trackClosed
	trackPeerFull
)

// serve handles one connection: frames until the peer closes, a deadline
// passes, or a frame is rejected. Nothing is decoded before the frame's
// credential is verified: an unauthenticated peer can make the server
// read 12 + wire.MaxCredLen bytes within AuthTimeout, no more.
func (s *Server) serve(conn net.Conn, st *connState) {
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
	st.read.Store(true)
	for first := true; ; first = false {
		var r io.Reader = conn
		if !first {
			// An authenticated agent may idle between frames; once a frame
			// begins its header and credential are due within AuthTimeout.
			_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
			var b [1]byte
			if _, err := io.ReadFull(conn, b[:]); err != nil {
				if !errors.Is(err, io.EOF) && !isClosed(err) {
					s.reject(peer, frameReason(err, ReasonTimeout), err)
				}
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(s.cfg.AuthTimeout))
			r = io.MultiReader(bytes.NewReader(b[:]), conn)
		}
		ack, keep := s.frame(conn, st, r, peer)
		if ack == nil {
			return
		}
		_ = conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if err := wire.WriteAck(conn, *ack); err != nil {
			s.log.Debug("could not ack an agent report", keyPeer, peer, keyErr, err)
			return
		}
		if !keep {
			return
		}
	}
}

// frame reads, authenticates and handles one frame from r. A nil ack
// means the connection ends without one (the peer is not worth an
// answer, or is gone); keep says whether it may carry on after the ack.
func (s *Server) frame(conn net.Conn, st *connState, r io.Reader, peer string) (ack *wire.Ack, keep bool) {
	h, err := wire.ReadHeader(r, s.cfg.MaxFrameBytes)
	if err != nil {
		if !errors.Is(err, io.EOF) && !isClosed(err) {
			s.reject(peer, frameReason(err, ReasonAuthTimeout), err)
		}
		return nil, false
	}
	if h.Type == wire.TypeAck {
		s.reject(peer, ReasonBadType, fmt.Errorf("%w: agents do not send acks", wire.ErrType))
		return nil, false
	}
	credStr, err := wire.ReadCred(r, h)
	if err != nil {
		if !isClosed(err) {
			s.reject(peer, frameReason(err, ReasonAuthTimeout), err)
		}
		return nil, false
	}
	// While munged decides, the connection is not evictable: its sender
	// was quick, and evicting it would hand its slot to a slower peer.
	st.verifying.Store(true)
	cred, err := s.verifier.Verify(credStr)
	if err == nil && s.allowed[cred.UID] {
		// Authenticated: the body may now take memory, within the
		// budget, and the connection may no longer be evicted.
		st.authed.Store(true)
	}
	st.verifying.Store(false)
	if err == nil && !s.allowed[cred.UID] {
		s.reject(peer, ReasonUIDNotAllowed, fmt.Errorf("uid %d may not report (root, SlurmUser %d or agent.allowed_uids)", cred.UID, s.cfg.SlurmUID), keyUID, cred.UID)
		s.discard(r, h)
		return &wire.Ack{Error: string(ReasonUIDNotAllowed)}, false
	}
	if err != nil {
		a, keep := s.refuse(peer, credentialReason(err), err)
		s.discard(r, h)
		return &a, keep
	}

	_ = conn.SetReadDeadline(time.Now().Add(s.cfg.FrameTimeout))
	// Waiting for room is bounded by AuthTimeout: an agent refused as busy
	// retries, which beats holding its connection for long.
	if !s.bodies.acquire(int64(h.Length), time.Now().Add(s.cfg.AuthTimeout), s.quit) {
		a, keep := s.refuse(peer, ReasonBusy, fmt.Errorf("no room for a body of %d bytes within %v (budget %d bytes)", h.Length, s.cfg.AuthTimeout, s.cfg.BodyBudget))
		s.discard(r, h)
		return &a, keep
	}
	defer s.bodies.release(int64(h.Length))
	body, err := wire.ReadBody(r, h)
	if err != nil {
		if !isClosed(err) {
			s.reject(peer, frameReason(err, ReasonTimeout), err)
		}
		return nil, false
	}
	if subtle.ConstantTimeCompare(cred.Payload, wire.Digest(h.Type, body)) != 1 {
		a, keep := s.refuse(peer, ReasonDigestMismatch, errors.New("the credential was not made for this report"))
		return &a, keep
	}
	select {
	case s.decoders <- struct{}{}:
	case <-s.quit:
		return nil, false
	}
	defer func() { <-s.decoders }()
	var a wire.Ack
	switch h.Type {
	case wire.TypeProfile:
		a, keep = s.handleProfile(peer, body)
	case wire.TypeJobEnd:
		a, keep = s.handleJobEnd(peer, body)
	case wire.TypeTelemetry:
		a, keep = s.handleTelemetry(peer, body)
	case wire.TypeJobUsage:
		a, keep = s.handleJobUsage(peer, body)
	default:
		// A report type of this protocol that this controller does not
		// handle (yet): refused, never decoded as another.
		a, keep = s.refuse(peer, ReasonBadType, fmt.Errorf("no handler for %v reports", h.Type))
	}
	return &a, keep
}

// discard reads and drops the body of a refused frame, within the
// deadline already running, so the refusal reaches the peer instead of
// being lost to the reset that closing a socket with unread data causes.
// Nothing is kept: it costs bandwidth, not memory.
func (s *Server) discard(r io.Reader, h wire.Header) {
	_, _ = io.CopyN(io.Discard, r, int64(h.Length))
}

// isClosed: the server closed the connection (shutting down).
func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

func (s *Server) handleProfile(peer string, body []byte) (wire.Ack, bool) {
	var rep wire.ProfileReport
	if err := wire.Unmarshal(body, &rep); err != nil {
		return s.refuse(peer, bodyReason(err), err)
	}
	if err := rep.Validate(); err != nil {
		return s.refuse(peer, ReasonInvalidReport, err)
	}
	rec := rep.Record
	// Even a trusted agent's numbers are checked: one bad profile would
	// size every job of its model (1e-9 GB is 1 MB per GPU).
	if err := rec.Check(); err != nil {
		ack, keep := s.refuse(peer, ReasonImplausible, fmt.Errorf("profile %s of model %q: %w", rec.ID, rec.Model, err))
		ack.ID = rec.ID
		return ack, keep
	}
	inserted, err := s.putWithinQuota(rec)
	var qe *errQuota
	if errors.As(err, &qe) {
		s.reject(peer, qe.reason, qe, keyUser, rec.User, keyNode, rec.Node, keyModel, rec.Model)
		// The reason first, so agents can tell it apart; then why.
		return wire.Ack{ID: rec.ID, Error: string(qe.reason) + ": " + qe.msg, Final: qe.final}, false
	}
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

// putWithinQuota stores rec unless it would break a quota (an *errQuota).
// A profile already stored is a duplicate whatever the quotas say now: its
// agent retries one whose ack it lost.
func (s *Server) putWithinQuota(rec profile.Record) (inserted bool, err error) {
	s.storeMu.Lock()
	defer s.storeMu.Unlock()
	now := time.Now()
	if qe := s.quota.check(rec, now); qe != nil {
		if has, err := s.store.Has(rec.ID); err != nil || has {
			return false, err
		}
		return false, qe
	}
	inserted, err = s.store.Put(rec)
	if err == nil && inserted {
		s.quota.add(rec, now)
	}
	return inserted, err
}

func (s *Server) handleTelemetry(peer string, body []byte) (wire.Ack, bool) {
	var rep wire.TelemetryReport
	if err := wire.Unmarshal(body, &rep); err != nil {
		return s.refuse(peer, bodyReason(err), err)
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
