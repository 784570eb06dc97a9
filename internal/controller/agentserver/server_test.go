package agentserver_test

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

const slurmUID = 64030

// syncBuffer: a log/output sink the code's goroutines may write to.
type syncBuffer = testenv.SyncBuffer

type fixture struct {
	t     *testing.T
	srv   *agentserver.Server
	store *profilestore.Store
	fake  *mungetest.Fake
	logs  *syncBuffer

	mu     sync.Mutex
	stored []profile.Record
}

func start(t *testing.T, mod func(*agentserver.Config)) *fixture {
	t.Helper()
	store, err := profilestore.Open(filepath.Join(t.TempDir(), "lachesis.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f := &fixture{t: t, store: store, fake: &mungetest.Fake{}, logs: &syncBuffer{}}
	cfg := agentserver.Config{
		MaxFrameBytes: 64 << 10,
		SlurmUID:      slurmUID,
		AuthTimeout:   500 * time.Millisecond,
		IdleTimeout:   2 * time.Second,
		FrameTimeout:  500 * time.Millisecond,
		OnProfile: func(r profile.Record) {
			f.mu.Lock()
			f.stored = append(f.stored, r)
			f.mu.Unlock()
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.srv, err = agentserver.Start(t.Context(), "127.0.0.1:0", cfg, f.fake, store, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func (f *fixture) dial() net.Conn { return f.dialFrom("") }

// dialFrom connects from a loopback address of its own (127.0.0.x), so a
// test can play several hosts; "" lets the kernel choose.
func (f *fixture) dialFrom(ip string) net.Conn {
	f.t.Helper()
	d := net.Dialer{}
	if ip != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(ip)}
	}
	c, err := d.Dial("tcp", f.srv.Addr().String())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// send writes raw bytes on a new connection and returns the ack, if any,
// and whether the server then closed the connection.
func (f *fixture) send(raw []byte) (wire.Ack, error, bool) {
	f.t.Helper()
	c := f.dial()
	if _, err := c.Write(raw); err != nil {
		f.t.Fatal(err)
	}
	ack, err := wire.ReadAck(c, 1<<20)
	closed := false
	if err == nil && !ack.OK {
		var one [1]byte
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, rerr := c.Read(one[:])
		closed = rerr != nil && !isTimeout(rerr)
	}
	return ack, err, closed
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func record(id string) profile.Record {
	return profile.Record{ID: id, Model: "bert", Node: "n1", User: "alice", GPUs: 1,
		Finished: time.Now().UTC().Truncate(time.Second),
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 3}},
		Best:     sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 2}}
}

func profileFrame(t *testing.T, s wire.Signer, rec profile.Record) []byte {
	t.Helper()
	b, err := wire.EncodeReport(s, wire.TypeProfile, &wire.ProfileReport{Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rawHeader(version, typ uint8, credLen uint16, length uint32) []byte {
	b := append([]byte{}, wire.Magic[:]...)
	b = append(b, version, typ)
	b = binary.BigEndian.AppendUint16(b, credLen)
	return binary.BigEndian.AppendUint32(b, length)
}

func (f *fixture) waitRejection(r agentserver.Reason) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.Stats().Rejections[r] == 0 {
		if time.Now().After(deadline) {
			f.t.Fatalf("no %s rejection counted; stats %+v\nlogs:\n%s", r, f.srv.Stats(), f.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(f.logs.String(), "reason="+string(r)) {
		f.t.Fatalf("rejection %s not logged:\n%s", r, f.logs)
	}
}

func TestProfileIsStoredAndAcked(t *testing.T) {
	f := start(t, nil)
	ack, err, _ := f.send(profileFrame(t, f.fake, record("n1-1")))
	if err != nil || !ack.OK || ack.Duplicate || ack.ID != "n1-1" {
		t.Fatalf("ack %+v, %v", ack, err)
	}
	if got, ok, _ := f.store.Latest("bert"); !ok || got.ID != "n1-1" {
		t.Fatalf("not stored: %+v", got)
	}
	if len(f.stored) != 1 {
		t.Fatalf("OnProfile called %d times", len(f.stored))
	}
}

func TestRepeatedProfileIsAckedAsDuplicate(t *testing.T) {
	f := start(t, nil)
	for i, dup := range []bool{false, true, true} {
		ack, err, _ := f.send(profileFrame(t, f.fake, record("n1-1")))
		if err != nil || !ack.OK || ack.Duplicate != dup {
			t.Fatalf("delivery %d: ack %+v, %v", i, ack, err)
		}
	}
	if n, _ := f.store.Count("bert"); n != 1 || len(f.stored) != 1 {
		t.Fatalf("%d rows, %d OnProfile calls; want 1 and 1", n, len(f.stored))
	}
	if st := f.srv.Stats(); st.Profiles != 1 || st.Duplicates != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOneConnectionCarriesManyReports(t *testing.T) {
	f := start(t, nil)
	c := f.dial()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.Write(profileFrame(t, f.fake, record(id))); err != nil {
			t.Fatal(err)
		}
		if ack, err := wire.ReadAck(c, 1<<20); err != nil || !ack.OK || ack.ID != id {
			t.Fatalf("ack %+v, %v", ack, err)
		}
	}
	if n, _ := f.store.Count("bert"); n != 3 {
		t.Fatalf("%d rows, want 3", n)
	}
}

func TestTelemetryIsStored(t *testing.T) {
	f := start(t, nil)
	rep := &wire.TelemetryReport{Node: "n1", At: time.Now(), GPUs: []wire.GPU{{Index: 0, UtilPct: 42}}}
	raw, err := wire.EncodeReport(f.fake, wire.TypeTelemetry, rep)
	if err != nil {
		t.Fatal(err)
	}
	if ack, err, _ := f.send(raw); err != nil || !ack.OK {
		t.Fatalf("ack %+v, %v", ack, err)
	}
	if gpus, _, _ := f.store.Telemetry("n1"); len(gpus) != 1 || gpus[0].UtilPct != 42 {
		t.Fatalf("telemetry %+v", gpus)
	}
}

func TestUIDsAllowedToReport(t *testing.T) {
	tests := []struct {
		name    string
		uid     uint32
		allowed []uint32
		ok      bool
	}{
		{"root is accepted", 0, nil, true},
		{"SlurmUser is accepted", slurmUID, nil, true},
		{"listed uid is accepted", 1000, []uint32{1000}, true},
		{"other uid is rejected", 1000, []uint32{1001}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, func(c *agentserver.Config) { c.AllowedUIDs = tc.allowed })
			signer := &mungetest.Fake{UID: tc.uid}
			ack, err, closed := f.send(profileFrame(t, signer, record("x")))
			if err != nil {
				t.Fatal(err)
			}
			if ack.OK != tc.ok {
				t.Fatalf("ack %+v, want OK=%v", ack, tc.ok)
			}
			if !tc.ok {
				if ack.Error != string(agentserver.ReasonUIDNotAllowed) || !closed {
					t.Fatalf("ack %+v closed=%v", ack, closed)
				}
				f.waitRejection(agentserver.ReasonUIDNotAllowed)
				if n, _ := f.store.Count("bert"); n != 0 {
					t.Fatal("a rejected report was stored")
				}
			}
		})
	}
}

// forger signs with a credential the verifier cannot know.
type forger struct{}

func (forger) Sign([]byte) (string, error) { return "MUNGE:AwQFAAD-forged-credential:", nil }

// otherBody signs the digest of a different body.
type otherBody struct{ s wire.Signer }

func (o otherBody) Sign([]byte) (string, error) {
	return o.s.Sign(wire.Digest(wire.TypeProfile, []byte("another body")))
}

func TestReportsWithBadCredentialsAreRejected(t *testing.T) {
	tests := []struct {
		name   string
		signer func(f *fixture) wire.Signer
		reason agentserver.Reason
	}{
		{"forged credential is rejected", func(*fixture) wire.Signer { return forger{} }, agentserver.ReasonBadCredential},
		{"credential for another body is rejected", func(f *fixture) wire.Signer { return otherBody{f.fake} }, agentserver.ReasonDigestMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, nil)
			ack, err, closed := f.send(profileFrame(t, tc.signer(f), record("x")))
			if err != nil {
				t.Fatal(err)
			}
			if ack.OK || ack.Error != string(tc.reason) || !closed {
				t.Fatalf("ack %+v closed=%v; want a %s rejection and a closed connection", ack, closed, tc.reason)
			}
			f.waitRejection(tc.reason)
			if n, _ := f.store.Count("bert"); n != 0 {
				t.Fatal("a rejected report was stored")
			}
		})
	}
}

func TestReplayedFrameIsRejected(t *testing.T) {
	f := start(t, nil)
	raw := profileFrame(t, f.fake, record("x"))
	if ack, err, _ := f.send(raw); err != nil || !ack.OK {
		t.Fatalf("first: %+v %v", ack, err)
	}
	ack, err, _ := f.send(raw)
	if err != nil || ack.OK || ack.Error != string(agentserver.ReasonReplayed) {
		t.Fatalf("replay: %+v %v", ack, err)
	}
	f.waitRejection(agentserver.ReasonReplayed)
}

func TestGarbageIsRejectedBeforeMunge(t *testing.T) {
	random := make([]byte, 4096)
	rand.Read(random)
	copy(random, "XXXX") // never the magic by chance
	tests := []struct {
		name   string
		raw    []byte
		reason agentserver.Reason
	}{
		{"random bytes are rejected", random, agentserver.ReasonBadMagic},
		{"1 GB length is rejected unread", rawHeader(wire.Version, 1, 8, 1<<30), agentserver.ReasonTooLarge},
		{"unknown version is rejected", append(rawHeader(9, 1, 1, 3), 'c', 1, 2, 3), agentserver.ReasonBadVersion},
		{"version 1 frame is rejected", append(rawHeader(1, 1, 0, 3), 0x81, 0xa0, 0xc0), agentserver.ReasonBadVersion},
		{"unknown type is rejected", append(rawHeader(wire.Version, 77, 1, 1), 'c', 0), agentserver.ReasonBadType},
		{"ack from an agent is rejected", append(rawHeader(wire.Version, uint8(wire.TypeAck), 0, 1), 0x80), agentserver.ReasonBadType},
		{"report without a credential is rejected", append(rawHeader(wire.Version, 1, 0, 1), 0x80), agentserver.ReasonCredLength},
		{"credential claiming 64 KiB is rejected", rawHeader(wire.Version, 2, 0xffff, 1), agentserver.ReasonCredLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, nil)
			c := f.dial()
			c.Write(tc.raw)
			begin := time.Now()
			// The server answers (an ack for a parsed frame) or hangs up; it
			// never waits for a body it has refused.
			io.Copy(io.Discard, c)
			if d := time.Since(begin); d > 400*time.Millisecond {
				t.Fatalf("connection stayed open %v after a bad frame", d)
			}
			f.waitRejection(tc.reason)
			if f.fake.Calls() != 0 {
				t.Fatal("garbage reached munge")
			}
		})
	}
}

func TestSlowAndIdlePeersTimeOut(t *testing.T) {
	tests := []struct {
		name  string
		write []byte
		max   time.Duration
	}{
		{"half a header times out after the auth timeout", rawHeader(wire.Version, 1, 10, 10)[:5], 1500 * time.Millisecond},
		{"header with half its credential times out after the auth timeout", append(rawHeader(wire.Version, 1, 10, 10), "MUNGE"...), 1500 * time.Millisecond},
		{"silent connection times out after the auth timeout", nil, 1500 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, nil)
			c := f.dial()
			c.Write(tc.write)
			begin := time.Now()
			io.Copy(io.Discard, c)
			if d := time.Since(begin); d > tc.max {
				t.Fatalf("closed after %v, want within %v", d, tc.max)
			}
			f.waitRejection(agentserver.ReasonAuthTimeout)
		})
	}
}

func TestConnectionsBeyondTheLimitOfAuthenticatedOnesAreClosed(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.MaxConns = 2 })
	// Two agents that have authenticated and stay connected.
	for _, id := range []string{"a", "b"} {
		c := f.dial()
		c.Write(profileFrame(t, f.fake, record(id)))
		if ack, err := wire.ReadAck(c, 1<<20); err != nil || !ack.OK {
			t.Fatalf("ack %+v, %v", ack, err)
		}
	}
	c := f.dial()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("third connection not closed: %v", err)
	}
	f.waitRejection(agentserver.ReasonConnLimit)
}

type panickingStore struct{ *profilestore.Store }

func (panickingStore) Put(profile.Record) (bool, error) { panic("boom") }

func TestPanicEndsOnlyItsConnection(t *testing.T) {
	store, err := profilestore.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	fake := &mungetest.Fake{}
	logs := &syncBuffer{}
	srv, err := agentserver.Start(t.Context(), "127.0.0.1:0", agentserver.Config{}, fake, panickingStore{store},
		slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatalf("server gone after a panic: %v", err)
		}
		c.Write(profileFrame(t, fake, record("x"+string(rune('a'+i)))))
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := wire.ReadAck(c, 1<<20); err == nil {
			t.Fatal("ack after a panic")
		}
		c.Close()
	}
	if n := srv.Stats().Rejections[agentserver.ReasonPanic]; n != 2 {
		t.Fatalf("%d panics counted, want 2\n%s", n, logs)
	}
}

func TestMungeOutageIsReportedToTheAgent(t *testing.T) {
	store, err := profilestore.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := agentserver.Start(t.Context(), "127.0.0.1:0", agentserver.Config{}, mungeDownVerifier{}, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(profileFrame(t, &mungetest.Fake{}, record("x")))
	ack, err := wire.ReadAck(c, 1<<20)
	if err != nil || ack.OK || ack.Error != string(agentserver.ReasonMungeDown) {
		t.Fatalf("ack %+v, %v", ack, err)
	}
}

type mungeDownVerifier struct{}

func (mungeDownVerifier) Verify(string) (munge.Credential, error) {
	return munge.Credential{}, errors.Join(munge.ErrMunge, munge.ErrSocket)
}

func TestCloseDropsOpenConnections(t *testing.T) {
	f := start(t, nil)
	for i := 0; i < 5; i++ {
		f.dial()
	}
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() { f.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close waits for idle connections")
	}
	if _, err := net.DialTimeout("tcp", f.srv.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Close")
	}
}

func TestRejectionLogsAreRateLimited(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.LogsPerSecond = 3 })
	for i := 0; i < 10; i++ {
		c := f.dial()
		c.Write([]byte("garbage!garbage!"))
		io.Copy(io.Discard, c)
	}
	if n := f.srv.Stats().Rejections[agentserver.ReasonBadMagic]; n != 10 {
		t.Fatalf("%d rejections counted, want 10", n)
	}
	if n := strings.Count(f.logs.String(), "reason=bad_magic"); n > 6 {
		t.Fatalf("%d rejection lines logged with a limit of 3/s", n)
	}
	// The flood has stopped; its size still reaches the log.
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(f.logs.String(), "agent rejections not logged individually") {
		if time.Now().After(deadline) {
			t.Fatalf("suppressed rejections never summarised:\n%s", f.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestImplausibleProfilesAreRefusedAndCounted(t *testing.T) {
	cases := []struct {
		name string
		best sensitivity.Demand
	}{
		{"1e-9 GB per GPU is refused", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1e-9}},
		{"1e300 GB per GPU is refused", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1e300}},
		{"negative memory is refused", sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: -2}},
		{"a huge CPU count is refused", sensitivity.Demand{CPUsPerGPU: 1 << 30, MemGBPerGPU: 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := start(t, nil)
			rec := record("absurd-1")
			rec.Best = c.best
			ack, err, _ := f.send(profileFrame(t, f.fake, rec))
			if err != nil || ack.OK || ack.Error != string(agentserver.ReasonImplausible) || ack.ID != "absurd-1" {
				t.Fatalf("ack %+v, %v; want a refusal naming %s and the record", ack, err, agentserver.ReasonImplausible)
			}
			f.waitRejection(agentserver.ReasonImplausible)
			if n, _ := f.store.Count("bert"); n != 0 || len(f.stored) != 0 {
				t.Fatalf("%d rows stored, %d OnProfile calls; want none", n, len(f.stored))
			}
			if !strings.Contains(f.logs.String(), "implausible demand") {
				t.Fatalf("the log does not say why:\n%s", f.logs)
			}
		})
	}
}
