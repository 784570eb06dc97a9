package agentserver

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

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

// connState is what the accept loop needs to know of a connection to pick
// one to evict.
type connState struct {
	since     time.Time
	ip        string
	read      atomic.Bool // its goroutine has begun reading it
	authed    atomic.Bool // a credential of this connection was verified
	verifying atomic.Bool // a credential of this connection is with munged now
}

// evictable: the server has begun reading the connection, and it has not
// authenticated and is not waiting for munged's verdict on its
// credential. An agent sends its header and credential at once, so it is
// evictable only until the server reads them; a peer whose credential was
// refused is evictable again while its body is discarded. Until its
// goroutine first runs, a connection cannot have shown anything: under a
// siege that opens a connection every fraction of a millisecond, the
// oldest of 64 slots is some 15 ms old, within one scheduling delay of a
// busy node, and an agent whose goroutine had not run yet was evicted
// with its report unread (TestSlowlorisDoesNotDelayARealReport, once, in
// a fresh Debian 13 root). One never read for peerGrace is evictable all the
// same, so a stuck goroutine cannot hold a slot.
func (st *connState) evictable(grace time.Time) bool {
	return !st.authed.Load() && !st.verifying.Load() && (st.read.Load() || st.since.Before(grace))
}

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
		victim, since = s.oldestEvictable(grace, func(st *connState) bool { return st.ip == ip && st.since.Before(grace) })
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
// may be evicted (grace: connections accepted before it may be evicted
// unread); s.mu must be held.
func (s *Server) oldestEvictable(grace time.Time, match func(*connState) bool) (net.Conn, time.Time) {
	var victim net.Conn
	var oldest time.Time
	for c, st := range s.conns {
		if st.evictable(grace) && match(st) && (victim == nil || st.since.Before(oldest)) {
			victim, oldest = c, st.since
		}
	}
	return victim, oldest
}

// anyUnread: some connection other than self (the newcomer, tracked
// before it has a slot) has not been read yet and is neither
// authenticated nor being verified; s.mu must be held.
func (s *Server) anyUnread(self *connState) bool {
	for _, st := range s.conns {
		if st != self && !st.read.Load() && !st.authed.Load() && !st.verifying.Load() {
			return true
		}
	}
	return false
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

// takeSlot takes a connection slot for self, just tracked. When all are
// taken it evicts the oldest connection that has been read and has not
// authenticated yet, and takes its slot: many hosts holding half a header
// each would otherwise keep an agent out for as long as they keep
// reconnecting, while an agent sends its header and credential at once,
// so its connection is safe once the server has read it.
//
// When none may be evicted yet because some have not been read (their
// goroutines are behind the accept loop, as they are when hundreds of
// peers connect at once), it waits for them, up to a second, rather than
// refuse the newcomer: an agent refused there would lose its report's
// first try to a siege that only had to be read. With every slot held by
// authenticated agents it refuses at once.
func (s *Server) takeSlot(self *connState) bool {
	wait := time.NewTimer(time.Second)
	defer wait.Stop()
	var victim net.Conn
	var oldest time.Time
	for {
		select {
		case s.slots <- struct{}{}:
			return true
		default:
		}
		s.mu.Lock()
		victim, oldest = s.oldestEvictable(time.Now().Add(-s.peerGrace()), func(st *connState) bool { return st != self })
		unread := victim == nil && s.anyUnread(self)
		s.mu.Unlock()
		if !unread {
			break
		}
		select {
		case s.slots <- struct{}{}:
			return true
		case <-time.After(5 * time.Millisecond):
		case <-wait.C:
			return false
		case <-s.quit:
			return false
		}
	}
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
