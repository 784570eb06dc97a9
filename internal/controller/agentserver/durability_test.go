package agentserver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
)

// waitLog is a slog handler that reports each message starting with
// prefix on seen, so a test waits for an event instead of a duration.
type waitLog struct {
	prefix string
	seen   chan string
}

func (w *waitLog) Enabled(context.Context, slog.Level) bool { return true }
func (w *waitLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, w.prefix) {
		select {
		case w.seen <- r.Message:
		default:
		}
	}
	return nil
}
func (w *waitLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *waitLog) WithGroup(string) slog.Handler      { return w }

// serviceWhoseKeyWritesFail is a Service on a fresh file db whose
// model-key writes fail, a real SQLite failure: other, a second
// connection, holds a trigger (fail_keys) that aborts every key insert
// until the test drops it. w is told of each failed write.
func serviceWhoseKeyWritesFail(t *testing.T) (db string, svc *agentserver.Service, w *waitLog, other *sql.DB) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "lachesis.db")
	w = &waitLog{prefix: "could not record submitted model keys", seen: make(chan string, 1)}
	svc, err := agentserver.NewService(agentserver.ServiceConfig{DBPath: db, FlushEvery: 10 * time.Millisecond}, slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	other, err = sql.Open("sqlite3", "file:"+db+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := other.Exec(`CREATE TRIGGER fail_keys BEFORE INSERT ON model_keys BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END`); err != nil {
		t.Fatal(err)
	}
	return db, svc, w, other
}

func TestServiceKeepsModelKeysWhoseWriteFailed(t *testing.T) {
	db, svc, w, other := serviceWhoseKeyWritesFail(t)
	svc.NoteModelKey("llama")
	<-w.seen // the write failed
	if _, err := other.Exec(`DROP TRIGGER fail_keys`); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil { // the last flush
		t.Fatal(err)
	}
	ro, err := profilestore.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.Missing()
	if err != nil || len(got) != 1 || got[0].Key != "llama" || got[0].Jobs != 1 {
		t.Fatalf("missing = %+v, %v; want llama once", got, err)
	}
}

func TestServiceStoresCachedProfilesAgainWhenTheFileIsDeleted(t *testing.T) {
	db := filepath.Join(t.TempDir(), "lachesis.db")
	fake := &mungetest.Fake{}
	w := &waitLog{prefix: "profile file reopened", seen: make(chan string, 1)}
	svc, err := agentserver.NewService(agentserver.ServiceConfig{Addr: "127.0.0.1:0", DBPath: db,
		Verifier: fake, FlushEvery: 10 * time.Millisecond}, slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	if ack := deliver(t, svc.Server().Addr().String(), fake, "n1-1"); !ack.OK {
		t.Fatalf("ack %+v", ack)
	}
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	<-w.seen
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := profilestore.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if r, ok, err := ro.Latest("bert"); err != nil || !ok || r.ID != "n1-1" {
		t.Fatalf("profile in the recreated file = %+v, %v, %v", r, ok, err)
	}
}

// A published profile stays published when the file is deleted: the
// service stores and publishes it again, so it still sizes other users'
// jobs after the next reload and restart.
func TestServicePublishesAgainWhenTheFileIsDeleted(t *testing.T) {
	db := filepath.Join(t.TempDir(), "lachesis.db")
	store, err := profilestore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	rec := record("pub-1")
	rec.UID = 1001
	if _, err := store.Put(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Publish(rec.Model, rec.ID); err != nil {
		t.Fatal(err)
	}
	store.Close()
	w := &waitLog{prefix: "profile file reopened", seen: make(chan string, 1)}
	svc, err := agentserver.NewService(agentserver.ServiceConfig{DBPath: db, FlushEvery: 10 * time.Millisecond}, slog.New(w))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := svc.Profile("bert", 2002); !ok || r.ID != "pub-1" {
		t.Fatalf("another user's job before the deletion: %q %v", r.ID, ok)
	}
	for _, p := range []string{db, db + "-wal", db + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	<-w.seen
	time.Sleep(50 * time.Millisecond) // a few reloads of the new file
	if r, ok := svc.Profile("bert", 2002); !ok || r.ID != "pub-1" {
		t.Fatalf("another user's job after the deletion: %q %v", r.ID, ok)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := profilestore.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if pub, err := ro.LatestPublished(); err != nil || pub["bert"].ID != "pub-1" {
		t.Fatalf("published in the recreated file: %v, %v", pub, err)
	}
}

// Issue 34 item 10: while the file cannot be written, the model keys
// noted wait in memory; a user submitting under ever new names must not
// grow them without end.
func TestModelKeysHeldWhileTheFileIsUnwritableAreBounded(t *testing.T) {
	_, svc, w, other := serviceWhoseKeyWritesFail(t)
	for k := 0; k < agentserver.MaxNotedModelKeys+500; k++ {
		svc.NoteModelKey(fmt.Sprintf("model-%d", k))
	}
	<-w.seen // a write failed: the keys went back into memory
	if _, err := other.Exec(`DROP TRIGGER fail_keys`); err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil { // the last flush writes what memory held
		t.Fatal(err)
	}
	var n int
	if err := other.QueryRow(`SELECT count(*) FROM model_keys`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 || n > agentserver.MaxNotedModelKeys {
		t.Fatalf("%d model keys held and written, want 1 to %d", n, agentserver.MaxNotedModelKeys)
	}
}
