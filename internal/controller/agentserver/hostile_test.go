package agentserver_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// signedFrame frames body as a report of type t with a good credential.
func signedFrame(t *testing.T, s wire.Signer, typ wire.Type, body []byte) []byte {
	t.Helper()
	cred, err := s.Sign(wire.Digest(typ, body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := wire.AppendFrame(nil, typ, cred, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deepBody is {"zz": [[[...]]]}, n levels under a key no report has: the
// shape the codec skips by recursion, a stack frame per byte.
func deepBody(n int) []byte {
	b := append([]byte{0x81, 0xa2, 'z', 'z'}, bytes.Repeat([]byte{0x91}, n)...)
	return append(b, 0xc0)
}

func TestAuthenticatedHostileBodiesAreRefusedByReason(t *testing.T) {
	const max = wire.MaxBodyBytes
	tests := []struct {
		name   string
		typ    wire.Type
		body   []byte
		reason agentserver.Reason
	}{
		{"a profile nested to the largest frame is refused as too deep", wire.TypeProfile, deepBody(max - 6), agentserver.ReasonTooDeep},
		{"telemetry nested a million deep is refused as too deep", wire.TypeTelemetry, deepBody(1 << 20), agentserver.ReasonTooDeep},
		{"a map claiming 2^32-1 entries is refused as too many", wire.TypeProfile, []byte{0xdf, 0xff, 0xff, 0xff, 0xff}, agentserver.ReasonTooMany},
		{"a million empty maps are refused as too many", wire.TypeTelemetry, append([]byte{0xdd, 0, 0x10, 0, 0}, bytes.Repeat([]byte{0x80}, 1<<20)...), agentserver.ReasonTooMany},
		{"a reserved byte is refused as a bad body", wire.TypeProfile, []byte{0xc1}, agentserver.ReasonBadBody},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, func(c *agentserver.Config) { c.MaxFrameBytes = max; c.FrameTimeout = 5 * time.Second })
			ack, err, closed := f.send(signedFrame(t, f.fake, tc.typ, tc.body))
			if err != nil || ack.OK || ack.Error != string(tc.reason) || !closed {
				t.Fatalf("ack %+v, %v, closed=%v; want a %s refusal", ack, err, closed, tc.reason)
			}
			f.waitRejection(tc.reason)
			// The server is still whole: a real report goes through.
			if ack, err, _ := f.send(profileFrame(t, f.fake, record("after"))); err != nil || !ack.OK {
				t.Fatalf("report after the attack: %+v, %v", ack, err)
			}
		})
	}
}

func TestUnauthenticatedBodyIsNeverDecoded(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.MaxFrameBytes = wire.MaxBodyBytes })
	body := deepBody(wire.MaxBodyBytes - 6)
	raw, err := wire.AppendFrame(nil, wire.TypeProfile, "MUNGE:forged", body)
	if err != nil {
		t.Fatal(err)
	}
	ack, err, _ := f.send(raw)
	if err != nil || ack.Error != string(agentserver.ReasonBadCredential) {
		t.Fatalf("ack %+v, %v; want bad_credential", ack, err)
	}
	if st := f.srv.Stats(); st.Rejections[agentserver.ReasonTooDeep] != 0 || st.Rejections[agentserver.ReasonBadCredential] != 1 {
		t.Fatalf("stats %+v: the body was looked at, or the credential not refused", st)
	}
}

func TestAuthenticatedPeerThatStallsItsBodyTimesOut(t *testing.T) {
	f := start(t, nil)
	raw := profileFrame(t, f.fake, record("x"))
	c := f.dial()
	c.Write(raw[:len(raw)-3]) // header, credential, most of the body
	begin := time.Now()
	io.Copy(io.Discard, c)
	if d := time.Since(begin); d > 1500*time.Millisecond {
		t.Fatalf("closed after %v, want about the 500 ms frame timeout", d)
	}
	f.waitRejection(agentserver.ReasonTimeout)
}

func TestOnePeerCannotTakeEverySlot(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.MaxConns = 8; c.MaxConnsPerPeer = 3 })
	// A slowloris from 127.0.0.2: 20 connections, two bytes each, held.
	// Each newcomer past the third evicts that address's oldest (once it
	// has had its grace) or is refused.
	for i := 0; i < 20; i++ {
		c := f.dialFrom("127.0.0.2")
		c.Write([]byte("LC"))
	}
	turnedAway := func(st agentserver.Stats) uint64 {
		return st.Rejections[agentserver.ReasonEvicted] + st.Rejections[agentserver.ReasonPeerLimit]
	}
	for deadline := time.Now().Add(5 * time.Second); turnedAway(f.srv.Stats()) < 17; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v; want 17 evicted or refused", f.srv.Stats())
		}
	}
	if st := f.srv.Stats(); st.Open > 3 || turnedAway(st) != 17 {
		t.Fatalf("stats %+v; want at most 3 open and 17 evicted or refused", st)
	}
	// Another host's report is answered at once.
	if ack, err, _ := f.send(profileFrame(t, f.fake, record("real"))); err != nil || !ack.OK {
		t.Fatalf("report beside the slowloris: %+v, %v", ack, err)
	}
}

// TestAgentBehindAnAddressFullOfHalfOpenConnectionsIsServed is issue 20
// item 8: a user on the agent's node shares its address. Eight half-open
// connections (the per-address cap), reopened as soon as they are closed,
// used to get every report from that address refused as
// peer_connection_limit for as long as they were held.
func TestAgentBehindAnAddressFullOfHalfOpenConnectionsIsServed(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.MaxConnsPerPeer = 8; c.AuthTimeout = 5 * time.Second })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := net.Dial("tcp", f.srv.Addr().String())
				if err == nil {
					c.Write([]byte("LC"))
					c.SetReadDeadline(time.Now().Add(10 * time.Second))
					io.Copy(io.Discard, c) // until the server drops it
					c.Close()
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); f.srv.Stats().Open < 8; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the holders did not fill the address: %+v", f.srv.Stats())
		}
	}
	// Reports sent as an agent sends them: retried every 200 ms (the
	// agent backs off from its retry_min) until acknowledged.
	for i := 0; i < 5; i++ {
		begin := time.Now()
		attempts := 0
		for {
			attempts++
			c := f.dial()
			c.Write(profileFrame(t, f.fake, record(fmt.Sprintf("real-%d", i))))
			ack, err := wire.ReadAck(c, 1<<20)
			c.Close()
			if err == nil && ack.OK {
				break
			}
			if time.Since(begin) > 3*time.Second {
				t.Fatalf("report %d from the besieged address not delivered in %d attempts over 3 s: %+v, %v; stats %+v", i, attempts, ack, err, f.srv.Stats())
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("report %d delivered in %v (%d attempts)", i, time.Since(begin).Round(time.Millisecond), attempts)
	}
	if f.srv.Stats().Rejections[agentserver.ReasonEvicted] == 0 {
		t.Fatalf("no half-open connection evicted: %+v", f.srv.Stats())
	}
}

func TestAddressFullOfAuthenticatedAgentsRefusesANewcomer(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.MaxConnsPerPeer = 2 })
	// Two authenticated connections that stay open: neither may be evicted.
	for _, id := range []string{"a", "b"} {
		c := f.dial()
		c.Write(profileFrame(t, f.fake, record(id)))
		if ack, err := wire.ReadAck(c, 1<<20); err != nil || !ack.OK {
			t.Fatalf("ack %+v, %v", ack, err)
		}
	}
	c := f.dial()
	c.Write([]byte("LC"))
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("third connection from a full address not closed: %v", err)
	}
	f.waitRejection(agentserver.ReasonPeerLimit)
	if n := f.srv.Stats().Rejections[agentserver.ReasonEvicted]; n != 0 {
		t.Fatalf("%d authenticated connections evicted", n)
	}
}

func TestAgentEvictsTheOldestUnauthenticatedAndHeldSlotsAreFreed(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.MaxConns = 4; c.MaxConnsPerPeer = 1 })
	// Four hosts hold every slot with two bytes each.
	var held []io.Reader
	for i := 2; i < 6; i++ {
		c := f.dialFrom(fmt.Sprintf("127.0.0.%d", i))
		c.Write([]byte("LC"))
		held = append(held, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.Stats().Open < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("slots not taken: %+v", f.srv.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An agent's report takes the oldest holder's slot on its first try.
	if ack, err, _ := f.send(profileFrame(t, f.fake, record("real"))); err != nil || !ack.OK {
		t.Fatalf("report while every slot was held: %+v, %v; stats %+v", ack, err, f.srv.Stats())
	}
	f.waitRejection(agentserver.ReasonEvicted)
	// The other holders are closed by the server at the auth deadline, and
	// their slots are free again.
	for i, c := range held {
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("held connection %d: %v (not closed by the server)", i, err)
		}
	}
	f.waitRejection(agentserver.ReasonAuthTimeout)
	st := f.srv.Stats()
	if st.Rejections[agentserver.ReasonEvicted] != 1 || st.Rejections[agentserver.ReasonAuthTimeout] != 3 || st.Rejections[agentserver.ReasonConnLimit] != 0 {
		t.Fatalf("stats %+v; want 1 eviction, 3 auth timeouts, no refusal", st)
	}
	for deadline := time.Now().Add(2 * time.Second); f.srv.Stats().Open != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("slots still taken: %+v", f.srv.Stats())
		}
	}
}

func TestBodyBudgetRefusesWhatDoesNotFit(t *testing.T) {
	f := start(t, func(c *agentserver.Config) {
		c.MaxFrameBytes, c.BodyBudget = 64<<10, 64<<10
		c.FrameTimeout = 2 * time.Second // the holder outlasts the 500 ms wait for room
	})
	big := record("big")
	big.Model = "bert"
	// One authenticated peer holds a body of the whole budget, unfinished.
	body := bytes.Repeat([]byte{0xc0}, 64<<10)
	raw := signedFrame(t, f.fake, wire.TypeProfile, body)
	holder := f.dial()
	holder.Write(raw[:len(raw)-10])
	time.Sleep(100 * time.Millisecond)
	ack, err, _ := f.send(profileFrame(t, f.fake, big))
	if err != nil || ack.Error != string(agentserver.ReasonBusy) {
		t.Fatalf("ack %+v, %v; want busy while the budget is held\n%s", ack, err, f.logs)
	}
	// The holder times out, its share returns, reports fit again.
	f.waitRejection(agentserver.ReasonTimeout)
	if ack, err, _ := f.send(profileFrame(t, f.fake, record("after"))); err != nil || !ack.OK {
		t.Fatalf("after the budget was freed: %+v, %v", ack, err)
	}
}

func TestConfigCapIsTheLargestBodyTheWireReads(t *testing.T) {
	if config.MaxFrameBytesCap != wire.MaxBodyBytes {
		t.Fatalf("config caps agent.max_frame_bytes at %d, the wire reads at most %d", config.MaxFrameBytesCap, wire.MaxBodyBytes)
	}
}
