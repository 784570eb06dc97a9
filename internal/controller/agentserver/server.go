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
	keyUser   = "user"
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
	ReasonCredLength     Reason = "bad_credential_length"
	ReasonTooLarge       Reason = "too_large"
	ReasonTruncated      Reason = "truncated"
	ReasonAuthTimeout    Reason = "auth_timeout" // header and credential late
	ReasonTimeout        Reason = "timeout"      // body late, or an authenticated peer idle
	ReasonBadBody        Reason = "bad_body"
	ReasonTooDeep        Reason = "too_deep"
	ReasonTooMany        Reason = "too_many_elements"
	ReasonBadCredential  Reason = "bad_credential"
	ReasonReplayed       Reason = "replayed_credential"
	ReasonExpired        Reason = "expired_credential"
	ReasonMungeDown      Reason = "munge_unavailable"
	ReasonDigestMismatch Reason = "digest_mismatch"
	ReasonUIDNotAllowed  Reason = "uid_not_allowed"
	ReasonInvalidReport  Reason = "invalid_report"
	ReasonImplausible    Reason = "implausible_profile" // numbers no job may be sized from
	ReasonStoreError     Reason = "store_error"
	ReasonQuota          Reason = "profile_quota" // a user or node is at a cap; final
	ReasonRateLimited    Reason = "rate_limited"  // the node's hourly rate; the agent retries
	ReasonConnLimit      Reason = "connection_limit"
	ReasonPeerLimit      Reason = "peer_connection_limit"
	ReasonEvicted        Reason = "evicted_unauthenticated" // its slot went to a newer peer
	ReasonBusy           Reason = "busy"                    // too many bodies in memory; the agent retries
	ReasonPanic          Reason = "panic"
)

// Store is where accepted reports go.
type Store interface {
	// Put stores a profile unless its ID is already stored.
	Put(rec profile.Record) (inserted bool, err error)
	// Has says whether a profile ID is stored (a retry of one a quota
	// would now refuse is acknowledged as a duplicate).
	Has(id string) (bool, error)
	// Usage counts stored profiles: what the quotas start from.
	Usage() ([]profilestore.Usage, error)
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
	// MaxConnsPerPeer caps one source address's connections, so one host
	// cannot take every slot. An agent uses one connection at a time. A
	// newcomer to a full address takes the slot of that address's oldest
	// unauthenticated connection: users of the agent's node share its
	// address, and must not keep it out with half-open connections.
	MaxConnsPerPeer int
	// AuthTimeout is how long a peer has to send a frame's header and
	// credential: from accept for the first frame, from its first byte
	// for later ones. Until then the peer is unauthenticated, and holds a
	// slot no longer than this.
	AuthTimeout time.Duration
	// IdleTimeout is how long an authenticated connection may wait before
	// its next frame begins; FrameTimeout is how long a body may take to
	// arrive once its credential is verified.
	IdleTimeout  time.Duration
	FrameTimeout time.Duration
	// BodyBudget bounds the bytes of all bodies held in memory at once
	// (at least MaxFrameBytes); a report that cannot get its share within
	// AuthTimeout is refused as busy and retried by its agent.
	BodyBudget int
	// WriteTimeout bounds sending an ack to a peer that does not read.
	WriteTimeout time.Duration
	// OnProfile is called (outside any lock) with each newly stored profile.
	OnProfile func(profile.Record)
	// OnJobEnd is called (outside any lock) with each valid job-end report;
	// false means nobody could take it yet, and the agent is told to retry.
	OnJobEnd func(wire.JobEndReport) bool
	// LogsPerSecond caps rejection log lines; the excess is counted and
	// summarised, so a flood cannot fill slurmctld's log.
	LogsPerSecond int
	// Quotas bound the profiles stored per user and node and their rate
	// per node (zero fields take lachesis.yaml's defaults).
	Quotas config.ProfileQuotas
}

// Defaults used for zero Config fields.
const (
	DefaultMaxConns        = 64
	DefaultMaxConnsPerPeer = 8
	DefaultAuthTimeout     = 5 * time.Second
	DefaultBodyBudget      = 8 << 20
	DefaultIdleTimeout     = 30 * time.Second
	DefaultFrameTimeout    = 30 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultLogsPerSecond   = 20
)

// ConfigFrom makes a Config from lachesis.yaml's agent section.
func ConfigFrom(a config.Agent, slurmUID uint32) Config {
	return Config{MaxFrameBytes: a.MaxFrameBytes, SlurmUID: slurmUID, AllowedUIDs: a.AllowedUIDs, Quotas: a.Quotas}
}

func (c *Config) fillDefaults() {
	orDefault(&c.MaxFrameBytes, config.Default().Agent.MaxFrameBytes)
	c.MaxFrameBytes = min(c.MaxFrameBytes, wire.MaxBodyBytes)
	orDefault(&c.MaxConns, DefaultMaxConns)
	orDefault(&c.MaxConnsPerPeer, DefaultMaxConnsPerPeer)
	orDefault(&c.AuthTimeout, DefaultAuthTimeout)
	orDefault(&c.BodyBudget, DefaultBodyBudget)
	c.BodyBudget = max(c.BodyBudget, c.MaxFrameBytes)
	orDefault(&c.IdleTimeout, DefaultIdleTimeout)
	orDefault(&c.FrameTimeout, DefaultFrameTimeout)
	orDefault(&c.WriteTimeout, DefaultWriteTimeout)
	orDefault(&c.LogsPerSecond, DefaultLogsPerSecond)
	q, d := &c.Quotas, config.Default().Agent.Quotas
	orDefault(&q.MaxModelsPerUser, d.MaxModelsPerUser)
	orDefault(&q.MaxProfilesPerUser, d.MaxProfilesPerUser)
	orDefault(&q.MaxModelsPerNode, d.MaxModelsPerNode)
	orDefault(&q.MaxProfilesPerNode, d.MaxProfilesPerNode)
	orDefault(&q.ProfilesPerNodePerHour, d.ProfilesPerNodePerHour)
}

// orDefault sets an unset (zero or negative) setting to its default.
func orDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
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
	stored, err := store.Usage()
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
		if !s.takeSlot() {
			s.untrack(conn)
			s.reject(peer, ReasonConnLimit, fmt.Errorf("%d connections open, none of them unauthenticated", s.cfg.MaxConns))
			conn.Close()
			continue
		}
		s.wg.Add(1)
		go s.serve(conn, st)
	}
}

// peerIP is the source address without its port: the unit of the
// per-peer cap.
func peerIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

type trackResult int

const (
	tracked trackResult = iota
	trackClosed
	trackPeerFull
)

// connState is what the accept loop needs to know of a connection to pick
// one to evict.
type connState struct {
	since     time.Time
	ip        string
	authed    atomic.Bool // a credential of this connection was verified
	verifying atomic.Bool // a credential of this connection is with munged now
}

// evictable: the connection has not authenticated and is not waiting for
// munged's verdict on its credential. An agent sends its header and
// credential at once, so it is evictable only until they arrive; a peer
// whose credential was refused is evictable again while its body is
// discarded.
func (st *connState) evictable() bool { return !st.authed.Load() && !st.verifying.Load() }

func (s *Server) track(c net.Conn, ip string) (*connState, trackResult) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, trackClosed
	}
	var victim net.Conn
	var since time.Time
	if s.perPeer[ip] >= s.cfg.MaxConnsPerPeer {
		// The address is full. A local user on an agent's node shares
		// its address: refusing here would let them keep the agent out
		// with a few half-open connections, reopened as they are closed.
		// The newcomer takes the slot of the address's oldest connection
		// that is neither authenticated nor being verified, and has had
		// peerGrace to send its credential: an agent has sent it long
		// before, so the user's reopened connections cannot evict it in
		// turn. Only when there is no such connection is the newcomer
		// refused.
		grace := time.Now().Add(-s.peerGrace())
		victim, since = s.oldestEvictable(func(st *connState) bool { return st.ip == ip && st.since.Before(grace) })
		if victim == nil {
			s.mu.Unlock()
			return nil, trackPeerFull
		}
		s.forget(victim)
	}
	s.perPeer[ip]++
	st := &connState{since: time.Now(), ip: ip}
	s.conns[c] = st
	s.mu.Unlock()
	if victim != nil {
		s.reject(victim.RemoteAddr().String(), ReasonEvicted, fmt.Errorf("unauthenticated for %v while its address held %d connections", time.Since(since).Round(time.Millisecond), s.cfg.MaxConnsPerPeer))
		victim.Close() // its goroutine ends at once and frees its slot
	}
	return st, tracked
}

// peerGrace is how long a connection is safe from eviction by a newcomer
// from its own address: an agent's header and credential arrive within
// it, even on a loaded node.
func (s *Server) peerGrace() time.Duration { return s.cfg.AuthTimeout / 10 }

// oldestEvictable is the oldest connection that match accepts and that
// may be evicted; s.mu must be held.
func (s *Server) oldestEvictable(match func(*connState) bool) (net.Conn, time.Time) {
	var victim net.Conn
	var oldest time.Time
	for c, st := range s.conns {
		if st.evictable() && match(st) && (victim == nil || st.since.Before(oldest)) {
			victim, oldest = c, st.since
		}
	}
	return victim, oldest
}

// forget stops counting c against its address; s.mu must be held. Its
// goroutine's untrack then finds nothing to undo.
func (s *Server) forget(c net.Conn) {
	st, ok := s.conns[c]
	if !ok {
		return
	}
	delete(s.conns, c)
	if s.perPeer[st.ip]--; s.perPeer[st.ip] <= 0 {
		delete(s.perPeer, st.ip)
	}
}

// takeSlot takes a connection slot. When all are taken it evicts the
// oldest connection that has not authenticated yet and takes its slot:
// many hosts holding half a header each would otherwise keep an agent out
// for as long as they keep reconnecting, while an agent sends its header
// and credential at once, so it is never the oldest unauthenticated peer
// for more than a munged round trip.
func (s *Server) takeSlot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	s.mu.Lock()
	victim, oldest := s.oldestEvictable(func(*connState) bool { return true })
	s.mu.Unlock()
	if victim == nil {
		return false
	}
	s.reject(victim.RemoteAddr().String(), ReasonEvicted, fmt.Errorf("unauthenticated for %v while %d slots were taken", time.Since(oldest).Round(time.Millisecond), s.cfg.MaxConns))
	victim.Close() // its goroutine ends at once and frees its slot
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-s.quit:
	}
	return false
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	s.forget(c)
	s.mu.Unlock()
}

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
	default:
		a, keep = s.handleTelemetry(peer, body)
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

// frameReason names a framing error; a deadline passing is onTimeout
// (the unauthenticated part or the body).
func frameReason(err error, onTimeout Reason) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, wire.ErrBadMagic):
		return ReasonBadMagic
	case errors.Is(err, wire.ErrVersion):
		return ReasonBadVersion
	case errors.Is(err, wire.ErrType):
		return ReasonBadType
	case errors.Is(err, wire.ErrCredLength):
		return ReasonCredLength
	case errors.Is(err, wire.ErrTooLarge):
		return ReasonTooLarge
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, os.ErrDeadlineExceeded):
		return onTimeout
	}
	return ReasonTruncated
}

// bodyReason names a decoding error of an authenticated body.
func bodyReason(err error) Reason {
	switch {
	case errors.Is(err, wire.ErrTooDeep):
		return ReasonTooDeep
	case errors.Is(err, wire.ErrTooMany):
		return ReasonTooMany
	}
	return ReasonBadBody
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
	Connections uint64 // accepted so far
	Open        int    // open now
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
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	out := Stats{
		Connections: s.stats.conns.Load(),
		Open:        open,
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

// maxDecoders bounds concurrent decodes: each may build a few MB (Check
// bounds how much), and decoding is CPU work that more goroutines would
// not speed up inside slurmctld.
const maxDecoders = 2

// budget is a counting semaphore over bytes, with a deadline.
type budget struct {
	mu   sync.Mutex
	free int64
	wake chan struct{} // closed and replaced on every release
}

func newBudget(n int) *budget { return &budget{free: int64(n), wake: make(chan struct{})} }

// acquire takes n bytes, waiting until deadline or quit.
func (b *budget) acquire(n int64, deadline time.Time, quit <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return true
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return false
		case <-quit:
			return false
		}
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.free += n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}
