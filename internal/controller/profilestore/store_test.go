package profilestore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

var t0 = time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)

func record(id, model string, finished time.Time) profile.Record {
	return profile.Record{
		ID: id, Model: model, Node: "lnode1", User: "alice", GPUs: 1,
		Started: finished.Add(-time.Minute), Finished: finished, Signal: "regex",
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 5}, {CPUs: 2, Throughput: 9.5}},
		Best:     sensitivity.Demand{CPUsPerGPU: 2, MemGBPerGPU: 20.83},
	}
}

func open(t *testing.T) (*profilestore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db", "lachesis.db")
	s, err := profilestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestPutStoresARecordOnce(t *testing.T) {
	s, _ := open(t)
	rec := record("n1-1", "bert", t0)
	for i, want := range []bool{true, false, false} {
		inserted, err := s.Put(rec)
		if err != nil {
			t.Fatal(err)
		}
		if inserted != want {
			t.Fatalf("put %d: inserted=%v, want %v", i, inserted, want)
		}
	}
	if n, _ := s.Count("bert"); n != 1 {
		t.Fatalf("%d rows for one record", n)
	}
}

func TestConcurrentPutsOfOneRecordInsertOnce(t *testing.T) {
	s, _ := open(t)
	rec := record("n1-1", "bert", t0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserts := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.Put(rec)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				inserts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if inserts != 1 {
		t.Fatalf("%d inserts of one record", inserts)
	}
}

func TestLatestReturnsTheLastFinishedProfile(t *testing.T) {
	s, _ := open(t)
	for _, r := range []profile.Record{
		record("a", "bert", t0.Add(time.Hour)),
		record("b", "bert", t0), // older, arrives later
		record("c", "gpt", t0),
	} {
		if _, err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := s.Latest("bert")
	if err != nil || !ok || got.ID != "a" {
		t.Fatalf("got %q, %v, %v; want a", got.ID, ok, err)
	}
	if !got.Finished.Equal(t0.Add(time.Hour)) || len(got.CPUSweep) != 2 || got.Best.CPUsPerGPU != 2 {
		t.Fatalf("stored record came back changed: %+v", got)
	}
	if _, ok, err := s.Latest("nope"); ok || err != nil {
		t.Fatalf("unknown model: ok=%v err=%v", ok, err)
	}
	all, err := s.LatestAll()
	if err != nil || len(all) != 2 || all["bert"].ID != "a" || all["gpt"].ID != "c" {
		t.Fatalf("LatestAll = %v, %v", all, err)
	}
}

func TestListSummarisesEachModel(t *testing.T) {
	s, _ := open(t)
	for _, r := range []profile.Record{record("a", "bert", t0), record("b", "bert", t0.Add(time.Second)), record("c", "alexnet", t0)} {
		if _, err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Model != "alexnet" || got[1].Model != "bert" {
		t.Fatalf("got %+v", got)
	}
	if b := got[1]; b.Profiles != 2 || b.ID != "b" || b.Points != 2 || b.Best.CPUsPerGPU != 2 {
		t.Fatalf("bert summary %+v", b)
	}
}

func TestMissingListsUnprofiledKeysByJobs(t *testing.T) {
	s, _ := open(t)
	if err := s.NoteModelKeys(map[string]int{"bert": 3, "gpt": 1, "vit": 2}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteModelKeys(map[string]int{"gpt": 4, "": 9, "neg": -1}, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(record("a", "bert", t0)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Missing()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "gpt" || got[0].Jobs != 5 || got[1].Key != "vit" {
		t.Fatalf("got %+v", got)
	}
	if !got[0].FirstSeen.Equal(t0) || !got[0].LastSeen.Equal(t0.Add(time.Hour)) {
		t.Fatalf("gpt seen %v..%v", got[0].FirstSeen, got[0].LastSeen)
	}
}

func TestTelemetryKeepsTheLatestSamplePerGPU(t *testing.T) {
	s, _ := open(t)
	rep := wire.TelemetryReport{Node: "n1", At: t0, GPUs: []wire.GPU{{Index: 0, UtilPct: 10}, {Index: 1, UtilPct: 20}}}
	if err := s.PutTelemetry(rep); err != nil {
		t.Fatal(err)
	}
	rep.At, rep.GPUs = t0.Add(time.Minute), []wire.GPU{{Index: 0, UtilPct: 99, Name: "H100"}}
	if err := s.PutTelemetry(rep); err != nil {
		t.Fatal(err)
	}
	gpus, at, err := s.Telemetry("n1")
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].UtilPct != 99 || gpus[0].Name != "H100" || gpus[1].UtilPct != 20 || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("got %+v at %v", gpus, at)
	}
}

func TestSharesTheLedgerFile(t *testing.T) {
	s, path := open(t)
	l, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Save([]ledger.Record{{JobID: 1, FirstSubmit: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(record("a", "bert", t0)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.Get(1); !ok || err != nil {
		t.Fatalf("ledger lost its job: %v %v", ok, err)
	}
}

func TestOpenReadOnly(t *testing.T) {
	s, path := open(t)
	if _, err := s.Put(record("a", "bert", t0)); err != nil {
		t.Fatal(err)
	}
	ro, err := profilestore.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, ok, err := ro.Latest("bert"); !ok || err != nil {
		t.Fatalf("read-only store misses the profile: %v %v", ok, err)
	}
	if _, err := ro.Put(record("b", "bert", t0)); err == nil {
		t.Fatal("read-only store accepted a write")
	}
}

func TestOpenReadOnlyExplainsAFileWithoutProfiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := ledger.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := profilestore.OpenReadOnly(path); !errors.Is(err, profilestore.ErrNoTables) {
		t.Fatalf("got %v, want ErrNoTables", err)
	}
	if _, err := profilestore.OpenReadOnly(filepath.Join(t.TempDir(), "absent.db")); !errors.Is(err, profilestore.ErrStore) {
		t.Fatalf("absent file: got %v", err)
	}
}

// Job names stand in for model keys, so the table would grow by one row
// per uniquely named job: it keeps the profilestore.MaxModelKeys most submitted.
func TestModelKeysAreBounded(t *testing.T) {
	s, err := profilestore.Open(filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Unix(1_750_000_000, 0)
	if err := s.NoteModelKeys(map[string]int{"hot": 5}, at); err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for i := 0; i < profilestore.MaxModelKeys+50; i++ {
		names[fmt.Sprintf("job-%d", i)] = 1
	}
	if err := s.NoteModelKeys(names, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	keys, err := s.Missing()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != profilestore.MaxModelKeys || keys[0].Key != "hot" {
		t.Fatalf("%d keys, first %+v; want %d with hot first", len(keys), keys[0], profilestore.MaxModelKeys)
	}
}

// Profiles are kept per owner; only a published one is everyone's, and a
// row stored before profiles had owners belongs to nobody.
func TestStoreKeepsProfilesPerOwnerAndPublishes(t *testing.T) {
	s, _ := open(t)
	a, b := record("a", "bert", t0), record("b", "bert", t0.Add(time.Hour))
	a.UID, b.UID = 1001, 1002
	for _, r := range []profile.Record{a, b} {
		if _, err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	owned, err := s.LatestOwned()
	if err != nil || len(owned) != 2 {
		t.Fatalf("owned %+v, %v; want both users' profiles", owned, err)
	}
	if pub, err := s.LatestPublished(); err != nil || len(pub) != 0 {
		t.Fatalf("published before any publication: %v, %v", pub, err)
	}
	if _, err := s.Publish("gpt", "a"); !errors.Is(err, profilestore.ErrNotFound) {
		t.Fatalf("publishing a profile under another model: %v", err)
	}
	if _, err := s.Publish("bert", "a"); err != nil {
		t.Fatal(err)
	}
	if pub, _ := s.LatestPublished(); pub["bert"].ID != "a" {
		t.Fatalf("published %v, want a", pub)
	}
	if r, ok, _ := s.LatestOf("bert", b.User); !ok || r.ID != "b" {
		t.Fatalf("latest of %s: %q", b.User, r.ID)
	}
}
