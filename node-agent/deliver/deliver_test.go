package deliver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/node-agent/spool"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

type controller struct {
	store *profilestore.Store
	srv   *agentserver.Server
}

// startController runs a real listener and store, with fake munge.
func startController(t *testing.T, addr string, verifier *mungetest.Fake, cfg agentserver.Config) *controller {
	t.Helper()
	store, err := profilestore.Open(filepath.Join(t.TempDir(), "ctl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	srv, err := agentserver.Start(context.Background(), addr, cfg, verifier, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &controller{store: store, srv: srv}
}

func spoolWith(t *testing.T, ids ...string) *spool.Spool {
	t.Helper()
	s, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, id := range ids {
		r := profile.Record{ID: id, Model: "bert", Node: "n1", Finished: time.Now(), Best: sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 2}}
		if err := s.FinishRun(id, r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func run(t *testing.T, d *deliver.Deliverer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestProfilesWaitForTheControllerAndArriveOnce(t *testing.T) {
	addr := freeAddr(t)
	fake := &mungetest.Fake{}
	sp := spoolWith(t, "a", "b", "c")
	client := &deliver.Client{Addr: addr, Signer: fake, Timeout: time.Second}
	run(t, deliver.New(sp, client, 20*time.Millisecond, 100*time.Millisecond, slog.New(slog.DiscardHandler)))

	waitFor(t, "failed attempts", func() bool {
		e, _, _ := sp.Get("a")
		return e.Attempts >= 2
	})
	if c, _ := sp.Count(); c.Pending != 3 {
		t.Fatalf("counts %+v while the controller is down", c)
	}
	e, _, _ := sp.Get("a")
	if !strings.Contains(e.LastError, "unreachable") {
		t.Fatalf("last error %q", e.LastError)
	}

	ctl := startController(t, addr, fake, agentserver.Config{})
	waitFor(t, "delivery", func() bool { c, _ := sp.Count(); return c.Pending == 0 })
	if n, _ := ctl.store.Count("bert"); n != 3 {
		t.Fatalf("%d profiles at the controller, want 3", n)
	}
	if st := ctl.srv.Stats(); st.Profiles != 3 || st.Duplicates != 0 {
		t.Fatalf("controller stats %+v", st)
	}
}

// loseFirstAck forwards to a real client but reports the first successful
// send as failed, as if the ack were lost on the way back.
type loseFirstAck struct {
	deliver.Sender
	mu   sync.Mutex
	lost bool
}

func (l *loseFirstAck) Send(ctx context.Context, t wire.Type, p any) (wire.Ack, error) {
	ack, err := l.Sender.Send(ctx, t, p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil && !l.lost {
		l.lost = true
		return wire.Ack{}, deliver.ErrUnreachable
	}
	return ack, err
}

func TestLostAckIsRetriedAndStoredOnce(t *testing.T) {
	addr := freeAddr(t)
	fake := &mungetest.Fake{}
	ctl := startController(t, addr, fake, agentserver.Config{})
	sp := spoolWith(t, "a")
	sender := &loseFirstAck{Sender: &deliver.Client{Addr: addr, Signer: fake, Timeout: time.Second}}
	run(t, deliver.New(sp, sender, 10*time.Millisecond, 50*time.Millisecond, slog.New(slog.DiscardHandler)))
	waitFor(t, "delivery", func() bool { c, _ := sp.Count(); return c.Pending == 0 })
	e, _, _ := sp.Get("a")
	if !e.Duplicate || e.Attempts != 2 {
		t.Fatalf("entry %+v; want delivered on the second attempt as a duplicate", e)
	}
	if n, _ := ctl.store.Count("bert"); n != 1 {
		t.Fatalf("%d rows for one profile", n)
	}
}

func TestRefusedProfileStaysPending(t *testing.T) {
	addr := freeAddr(t)
	startController(t, addr, &mungetest.Fake{}, agentserver.Config{})
	sp := spoolWith(t, "a")
	// uid 1234 is neither root nor SlurmUser nor allowed.
	client := &deliver.Client{Addr: addr, Signer: &mungetest.Fake{UID: 1234}, Timeout: time.Second}
	run(t, deliver.New(sp, client, 10*time.Millisecond, 50*time.Millisecond, slog.New(slog.DiscardHandler)))
	waitFor(t, "a refused attempt", func() bool {
		e, _, _ := sp.Get("a")
		return e.Attempts >= 1
	})
	e, _, _ := sp.Get("a")
	if !e.Delivered.IsZero() || !strings.Contains(e.LastError, "uid_not_allowed") {
		t.Fatalf("entry %+v", e)
	}
}

func TestKickDeliversANewProfileAtOnce(t *testing.T) {
	addr := freeAddr(t)
	fake := &mungetest.Fake{}
	startController(t, addr, fake, agentserver.Config{})
	sp := spoolWith(t)
	d := deliver.New(sp, &deliver.Client{Addr: addr, Signer: fake, Timeout: time.Second}, time.Hour, time.Hour, slog.New(slog.DiscardHandler))
	run(t, d)
	time.Sleep(50 * time.Millisecond) // the first round found nothing
	sp.FinishRun("n", profile.Record{ID: "n", Model: "bert", Finished: time.Now(), Best: sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 2}})
	d.Kick()
	select {
	case <-d.Delivered():
	case <-time.After(5 * time.Second):
		t.Fatal("a kicked delivery did not happen (retry intervals are an hour)")
	}
}

func TestClientGivesUpOnASilentController(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accept, never answer
		}
	}()
	client := &deliver.Client{Addr: l.Addr().String(), Signer: &mungetest.Fake{}, Timeout: 300 * time.Millisecond}
	begin := time.Now()
	_, err = client.Send(context.Background(), wire.TypeProfile, &wire.ProfileReport{})
	if !errors.Is(err, deliver.ErrUnreachable) || time.Since(begin) > 2*time.Second {
		t.Fatalf("got %v after %v", err, time.Since(begin))
	}
}

// TestProfilePastAQuotaIsRefusedForGoodAndDoesNotBlockTheRest: a profile
// the controller refuses for good (a user's model cap) is kept with its
// reason and never sent again, and the profiles spooled after it arrive.
func TestProfilePastAQuotaIsRefusedForGoodAndDoesNotBlockTheRest(t *testing.T) {
	addr := freeAddr(t)
	fake := &mungetest.Fake{}
	ctl := startController(t, addr, fake, agentserver.Config{Quotas: config.ProfileQuotas{MaxModelsPerUser: 1}})
	sp, err := spool.Open(filepath.Join(t.TempDir(), "spool.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	for i, p := range []struct{ model, user string }{{"bert", "mallory"}, {"gpt", "mallory"}, {"t5", "alice"}} {
		r := profile.Record{ID: fmt.Sprint("p", i), Model: p.model, User: p.user, Node: "n1", Finished: time.Now(),
			Best: sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 2}}
		if err := sp.FinishRun(r.ID, r); err != nil {
			t.Fatal(err)
		}
	}
	client := &deliver.Client{Addr: addr, Signer: fake, Timeout: time.Second}
	run(t, deliver.New(sp, client, 10*time.Millisecond, 50*time.Millisecond, slog.New(slog.DiscardHandler)))
	waitFor(t, "every profile delivered or refused", func() bool { c, _ := sp.Count(); return c.Pending == 0 })
	e, _, _ := sp.Get("p1")
	if e.Refused.IsZero() || !e.Delivered.IsZero() || !strings.Contains(e.LastError, "agent.max_models_per_user") {
		t.Fatalf("mallory's second model: %+v; want refused for good, naming the cap", e)
	}
	if c, _ := sp.Count(); c != (spool.Counts{Delivered: 2, Refused: 1}) {
		t.Fatalf("counts %+v", c)
	}
	time.Sleep(200 * time.Millisecond) // several retry periods
	if e2, _, _ := sp.Get("p1"); e2.Attempts != e.Attempts {
		t.Fatalf("a refused profile was sent again: %d attempts, then %d", e.Attempts, e2.Attempts)
	}
	if n, _ := ctl.store.Count("t5"); n != 1 {
		t.Fatal("the profile spooled after the refused one did not arrive")
	}
}
