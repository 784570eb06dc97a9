package agentserver

import (
	"errors"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

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
	JobUsage    uint64 // per-job GPU usage reports taken
	Rejections  map[Reason]uint64
}

type stats struct {
	conns, profiles, duplicates, telemetry, jobUsage atomic.Uint64
	mu                                               sync.Mutex
	rejections                                       map[Reason]uint64
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
		JobUsage:    s.stats.jobUsage.Load(),
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
