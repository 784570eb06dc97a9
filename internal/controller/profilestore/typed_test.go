package profilestore_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/profile"
)

func typed(id, model, typ string, finished time.Time, tput float64) profile.Record {
	r := record(id, model, finished)
	r.GPUType = typ
	r.GPUs = 2
	r.CPUSweep = []profile.Measurement{{CPUs: 1, Throughput: tput / 2}, {CPUs: 2, Throughput: tput}}
	return r
}

func TestThroughputsKeepTheLatestProfilePerModelAndType(t *testing.T) {
	s, _ := open(t)
	for _, r := range []profile.Record{
		typed("1", "bert", "a", t0, 100),
		typed("2", "bert", "a", t0.Add(time.Hour), 160),  // newer on a: wins
		typed("3", "bert", "B", t0, 40),                  // type stored lower case
		typed("4", "bert", "", t0.Add(2*time.Hour), 999), // untyped: not a speed
		typed("5", "gpt", "a", t0, 70),
	} {
		if _, err := s.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	nvml := typed("6", "gpt", "b", t0, 99)
	nvml.Signal = "nvml" // utilisation: says nothing about speed
	if _, err := s.Put(nvml); err != nil {
		t.Fatal(err)
	}
	got, err := s.Throughputs()
	if err != nil {
		t.Fatal(err)
	}
	// Per GPU: the best point over the record's 2 GPUs.
	if len(got) != 2 || got["bert"]["a"] != 80 || got["bert"]["b"] != 20 || len(got["bert"]) != 2 ||
		got["gpt"]["a"] != 35 || len(got["gpt"]) != 1 {
		t.Fatalf("throughputs %v, want bert a=80 b=20 and gpt a=35", got)
	}
	// Sizing still takes the model's latest profile whatever its type.
	if r, ok, _ := s.Latest("bert"); !ok || r.ID != "4" {
		t.Fatalf("latest bert profile %q, want 4", r.ID)
	}
}

// A profile table made before profiles had a GPU type: opening it adds the
// column, its profiles stay (untyped, still sizing jobs), and typed
// profiles stored afterwards give throughputs.
func TestProfileTableWithoutGPUTypeIsMigrated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old := record("old-1", "bert", t0)
	blob, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlitedb.Open(path, sqlitedb.Normal, 0o750, `
CREATE TABLE profiles (
	id TEXT PRIMARY KEY, model TEXT NOT NULL, node TEXT NOT NULL, user TEXT NOT NULL,
	gpus INTEGER NOT NULL, finished INTEGER NOT NULL, received INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX profiles_by_model ON profiles(model, finished);`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO profiles VALUES (?,?,?,?,?,?,?,?)`,
		old.ID, old.Model, old.Node, old.User, old.GPUs, old.Finished.UnixNano(), old.Finished.UnixNano(), string(blob)); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for round := 0; round < 2; round++ { // the second open finds the column
		s, err := profilestore.Open(path)
		if err != nil {
			t.Fatalf("open %d of an old profile table: %v", round, err)
		}
		if n, err := s.Count("bert"); err != nil || n != 1+2*round {
			t.Fatalf("open %d: %d profiles of bert (%v), want %d", round, n, err, 1+2*round)
		}
		if round == 0 {
			if r, ok, err := s.Latest("bert"); err != nil || !ok || r.ID != "old-1" || r.GPUType != "" {
				t.Fatalf("old profile after migration: %+v, %v, %v", r, ok, err)
			}
			for _, r := range []profile.Record{typed("n-a", "bert", "a", t0.Add(time.Minute), 60), typed("n-b", "bert", "b", t0.Add(time.Minute), 20)} {
				if ins, err := s.Put(r); err != nil || !ins {
					t.Fatalf("typed put into a migrated table: %v, %v", ins, err)
				}
			}
		}
		got, err := s.Throughputs()
		if err != nil || got["bert"]["a"] != 30 || got["bert"]["b"] != 10 {
			t.Fatalf("throughputs after migration %v, %v; want bert a=30 b=10", got, err)
		}
		s.Close()
	}
}

func TestCacheFollowsTheNewestTypedProfile(t *testing.T) {
	c := profilestore.NewCache(nil, []profile.Record{typed("1", "bert", "a", t0, 100)})
	if got := c.Throughputs()["bert"]["a"]; got != 50 {
		t.Fatalf("initial throughput %v, want 50", got)
	}
	before := c.Throughputs()
	c.Offer(typed("2", "bert", "a", t0.Add(-time.Hour), 10)) // older: ignored
	c.Offer(typed("3", "bert", "b", t0, 30))
	c.Offer(typed("4", "bert", "A", t0.Add(time.Hour), 120))
	// A burst is published within typedPublishEvery (1 s).
	var got map[string]map[string]float64
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got = c.Throughputs()
		if got["bert"]["a"] == 60 && got["bert"]["b"] == 15 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("throughputs %v, want a=60 b=15", got)
		}
	}
	if before["bert"]["a"] != 50 || len(before["bert"]) != 1 {
		t.Fatalf("a reader's map changed under it: %v", before)
	}
}
