package agentserver

import (
	"net"
	"testing"
	"time"
)

// A connection whose goroutine has not read it yet is passed over for an
// older one that was read, even when it is the oldest of all; unread for
// longer than the grace, it may go; authenticated or being verified, never.
func TestAConnectionNotYetReadIsEvictedOnlyAfterTheGrace(t *testing.T) {
	now := time.Now()
	s := &Server{conns: map[net.Conn]*connState{}}
	conn := func(age time.Duration, state func(*connState)) net.Conn {
		c, peer := net.Pipe()
		t.Cleanup(func() { c.Close(); peer.Close() })
		st := &connState{since: now.Add(-age), ip: "127.0.0.2"}
		state(st)
		s.conns[c] = st
		return c
	}
	read := func(st *connState) { st.read.Store(true) }
	unreadAgent := conn(30*time.Millisecond, func(*connState) {})
	heldTwoBytes := conn(20*time.Millisecond, read)
	conn(40*time.Millisecond, func(st *connState) { read(st); st.verifying.Store(true) })
	conn(50*time.Millisecond, func(st *connState) { read(st); st.authed.Store(true) })
	all := func(*connState) bool { return true }

	grace := now.Add(-500 * time.Millisecond)
	if victim, _ := s.oldestEvictable(grace, all); victim != heldTwoBytes {
		t.Fatalf("evicted %v; want the read, unauthenticated connection (%v), not the unread agent (%v)", victim, heldTwoBytes, unreadAgent)
	}
	delete(s.conns, heldTwoBytes)
	if victim, _ := s.oldestEvictable(grace, all); victim != nil {
		t.Fatalf("evicted %v: an unread connection within the grace, or one authenticated or being verified", victim)
	}
	if victim, _ := s.oldestEvictable(now.Add(-10*time.Millisecond), all); victim != unreadAgent {
		t.Fatalf("evicted %v; want the connection unread past the grace (%v)", victim, unreadAgent)
	}
}
