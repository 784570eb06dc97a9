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

// With every slot taken and no connection evictable, a newcomer waits
// while some slot holder has not been read yet (here: until a slot frees)
// and is refused at once when every holder is authenticated.
func TestANewcomerWaitsForUnreadSlotHoldersButNotForAuthenticatedOnes(t *testing.T) {
	s := &Server{conns: map[net.Conn]*connState{}, slots: make(chan struct{}, 1), quit: make(chan struct{}),
		cfg: Config{AuthTimeout: 5 * time.Second}}
	s.slots <- struct{}{}
	holder, peer := net.Pipe()
	t.Cleanup(func() { holder.Close(); peer.Close() })
	held := &connState{since: time.Now(), ip: "127.0.0.2"}
	s.conns[holder] = held
	self := &connState{since: time.Now(), ip: "127.0.0.1"}

	go func() { time.Sleep(50 * time.Millisecond); <-s.slots }() // the holder's goroutine ends
	if !s.takeSlot(self) {
		t.Fatal("refused while a slot holder had not been read yet; want a wait for it")
	}

	held.read.Store(true)
	held.authed.Store(true)
	begin := time.Now()
	if s.takeSlot(self) {
		t.Fatal("took a slot held by an authenticated agent")
	}
	if d := time.Since(begin); d > 100*time.Millisecond {
		t.Fatalf("refused after %v; want at once when every holder is authenticated", d)
	}
}
