package agentserver_test

import (
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/profile"
)

func deliver(t *testing.T, addr string, signer wire.Signer, id string) wire.Ack {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	raw, err := wire.EncodeReport(signer, wire.TypeProfile, &wire.ProfileReport{Record: record(id)})
	if err != nil {
		t.Fatal(err)
	}
	c.Write(raw)
	ack, err := wire.ReadAck(c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return ack
}

func TestServiceCachesProfilesAcrossRestarts(t *testing.T) {
	db := filepath.Join(t.TempDir(), "lachesis.db")
	fake := &mungetest.Fake{}
	cfg := agentserver.ServiceConfig{Addr: "127.0.0.1:0", DBPath: db, Verifier: fake}
	svc, err := agentserver.NewService(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := svc.Profile("bert", 0); ok {
		t.Fatal("profile before any report")
	}
	if ack := deliver(t, svc.Server().Addr().String(), fake, "n1-1"); !ack.OK {
		t.Fatalf("ack %+v", ack)
	}
	if r, ok := svc.Profile("bert", 0); !ok || r.ID != "n1-1" {
		t.Fatalf("cache: %+v %v", r, ok)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}

	svc, err = agentserver.NewService(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if r, ok := svc.Profile("bert", 0); !ok || r.ID != "n1-1" {
		t.Fatalf("after restart: %+v %v", r, ok)
	}
}

func TestServiceWritesNotedModelKeysOnClose(t *testing.T) {
	db := filepath.Join(t.TempDir(), "lachesis.db")
	svc, err := agentserver.NewService(agentserver.ServiceConfig{Addr: "127.0.0.1:0", DBPath: db,
		Verifier: &mungetest.Fake{}, FlushEvery: time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	svc.NoteModelKey("gpt")
	svc.NoteModelKey("gpt")
	svc.NoteModelKey("")
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := profilestore.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.Missing()
	if err != nil || len(got) != 1 || got[0].Key != "gpt" || got[0].Jobs != 2 {
		t.Fatalf("missing = %+v, %v", got, err)
	}
}

func TestServiceListensOnceItsPortIsFree(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := busy.Addr().String()
	svc, err := agentserver.NewService(agentserver.ServiceConfig{Addr: addr, DBPath: filepath.Join(t.TempDir(), "db"),
		Verifier: &mungetest.Fake{}, RetryEvery: 50 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a taken port must not fail the core: %v", err)
	}
	defer svc.Close()
	if svc.Server() != nil {
		t.Fatal("listening on a taken port")
	}
	busy.Close()
	deadline := time.Now().Add(5 * time.Second)
	for svc.Server() == nil {
		if time.Now().After(deadline) {
			t.Fatal("never listened after the port was freed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if svc.Server().Addr().String() != addr {
		t.Fatalf("listening on %s, want %s", svc.Server().Addr(), addr)
	}
}

// A profile stored before ingest checked numbers must not size jobs after
// a restart: the service leaves its model unprofiled and says why.
func TestServiceIgnoresAStoredImplausibleProfile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "lachesis.db")
	store, err := profilestore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	bad := record("old-1")
	bad.Best.MemGBPerGPU = 1e-9
	good := record("old-2")
	good.Model = "gnmt"
	for _, r := range []profile.Record{bad, good} {
		if _, err := store.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	store.Close()
	logs := &syncBuffer{}
	svc, err := agentserver.NewService(agentserver.ServiceConfig{DBPath: db}, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if r, ok := svc.Profile("bert", 0); ok {
		t.Fatalf("the implausible profile sizes jobs: %+v", r)
	}
	if _, ok := svc.Profile("gnmt", 0); !ok {
		t.Fatal("the plausible profile was dropped too")
	}
	if !strings.Contains(logs.String(), "ignoring a stored profile") {
		t.Fatalf("not logged:\n%s", logs)
	}
}
