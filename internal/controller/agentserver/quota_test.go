package agentserver_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/profile"
)

// quotaRecord is a profile of model by user, measured on node.
func quotaRecord(id, model, user, node string) profile.Record {
	r := record(id)
	r.Model, r.User, r.Node = model, user, node
	return r
}

func (f *fixture) put(rec profile.Record) wire.Ack {
	f.t.Helper()
	ack, err, _ := f.send(profileFrame(f.t, f.fake, rec))
	if err != nil {
		f.t.Fatalf("profile %s: %v", rec.ID, err)
	}
	return ack
}

// wantQuota checks a final refusal that names the key of the cap.
func wantQuota(t *testing.T, ack wire.Ack, key string) {
	t.Helper()
	if ack.OK || !ack.Final || !strings.HasPrefix(ack.Error, string(agentserver.ReasonQuota)+": ") || !strings.Contains(ack.Error, key) {
		t.Fatalf("ack %+v; want a final %s refusal naming %s", ack, agentserver.ReasonQuota, key)
	}
}

func TestProfileCapsPerUser(t *testing.T) {
	f := start(t, func(c *agentserver.Config) {
		c.Quotas = config.ProfileQuotas{MaxModelsPerUser: 2, MaxProfilesPerUser: 3}
	})
	for i, m := range []string{"a", "b"} {
		if ack := f.put(quotaRecord(fmt.Sprint("p", i), m, "mallory", "n1")); !ack.OK {
			t.Fatalf("profile %d: %+v", i, ack)
		}
	}
	// A third model of the same user is refused for good, and said why.
	wantQuota(t, f.put(quotaRecord("p2", "c", "mallory", "n1")), "agent.max_models_per_user")
	f.waitRejection(agentserver.ReasonQuota)
	if !strings.Contains(f.logs.String(), `user=mallory node=n1 model=c`) {
		t.Fatalf("the refusal does not name who, where and what:\n%s", f.logs)
	}
	// Another profile of a model the user has is stored, up to the
	// profile cap; other users are not affected.
	if ack := f.put(quotaRecord("p3", "a", "mallory", "n1")); !ack.OK {
		t.Fatalf("a known model's profile: %+v", ack)
	}
	wantQuota(t, f.put(quotaRecord("p4", "b", "mallory", "n1")), "agent.max_profiles_per_user")
	if ack := f.put(quotaRecord("p5", "c", "alice", "n1")); !ack.OK {
		t.Fatalf("another user's profile: %+v", ack)
	}
	// A retry of a stored profile is a duplicate, whatever the caps say.
	if ack := f.put(quotaRecord("p3", "a", "mallory", "n1")); !ack.OK || !ack.Duplicate {
		t.Fatalf("a retried stored profile: %+v", ack)
	}
	if n, _ := f.store.Count("c"); n != 1 {
		t.Fatalf("%d profiles of c stored, want alice's only", n)
	}
}

func TestProfileCapsPerNodeCountWhatIsAlreadyStored(t *testing.T) {
	f := start(t, nil)
	for i := 0; i < 3; i++ {
		if _, err := f.store.Put(quotaRecord(fmt.Sprint("old", i), fmt.Sprint("m", i), fmt.Sprint("u", i), "n1")); err != nil {
			t.Fatal(err)
		}
	}
	// A listener started on that store counts its rows.
	cfg := agentserver.Config{SlurmUID: slurmUID, AuthTimeout: 500 * time.Millisecond,
		Quotas: config.ProfileQuotas{MaxModelsPerNode: 3, MaxProfilesPerNode: 4}}
	srv, err := agentserver.Start(t.Context(), "127.0.0.1:0", cfg, f.fake, f.store, slog.New(slog.NewTextHandler(f.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	f.srv = srv
	wantQuota(t, f.put(quotaRecord("new0", "m3", "u9", "n1")), "agent.max_models_per_node")
	if ack := f.put(quotaRecord("new1", "m0", "u9", "n1")); !ack.OK {
		t.Fatalf("a known model on the node: %+v", ack)
	}
	wantQuota(t, f.put(quotaRecord("new2", "m1", "u9", "n1")), "agent.max_profiles_per_node")
	if ack := f.put(quotaRecord("new3", "m3", "u9", "n2")); !ack.OK {
		t.Fatalf("another node: %+v", ack)
	}
}

func TestProfilesPerNodeAreRateLimited(t *testing.T) {
	f := start(t, func(c *agentserver.Config) { c.Quotas = config.ProfileQuotas{ProfilesPerNodePerHour: 2} })
	for i := 0; i < 2; i++ {
		if ack := f.put(quotaRecord(fmt.Sprint("r", i), fmt.Sprint("m", i), "u", "n1")); !ack.OK {
			t.Fatalf("profile %d: %+v", i, ack)
		}
	}
	// Past the rate: refused for now (the agent retries), not for good.
	ack := f.put(quotaRecord("r2", "m2", "u", "n1"))
	if ack.OK || ack.Final || !strings.HasPrefix(ack.Error, string(agentserver.ReasonRateLimited)+": ") || !strings.Contains(ack.Error, "agent.profiles_per_node_per_hour") {
		t.Fatalf("ack %+v; want a retryable %s refusal", ack, agentserver.ReasonRateLimited)
	}
	f.waitRejection(agentserver.ReasonRateLimited)
	if ack := f.put(quotaRecord("r3", "m2", "u", "n2")); !ack.OK {
		t.Fatalf("another node: %+v", ack)
	}
}
