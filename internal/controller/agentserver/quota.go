package agentserver

import (
	"fmt"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/profile"
)

// quota applies config.ProfileQuotas to new profiles. Its counts start
// from the store (Store.ProfileCounts) and grow with each profile stored through
// the server; the caller serialises check and add (Server.storeMu).
// Memory is bounded by the caps themselves: a user's or node's set of
// models never outgrows its cap.
type quota struct {
	limits config.ProfileQuotas
	users  map[string]*storedProfiles
	nodes  map[string]*storedProfiles
	rate   map[string]*tokens // by node
}

// storedProfiles is what one user (or node) has stored.
type storedProfiles struct {
	models   map[string]struct{}
	profiles int
}

// tokens is a node's rate limit: a bucket of ProfilesPerNodePerHour
// tokens, refilled continuously over an hour.
type tokens struct {
	left float64
	at   time.Time
}

func newQuota(limits config.ProfileQuotas, stored []profilestore.ProfileCount) *quota {
	q := &quota{limits: limits, users: map[string]*storedProfiles{}, nodes: map[string]*storedProfiles{}, rate: map[string]*tokens{}}
	for _, u := range stored {
		q.count(q.users, u.User, u.Model, u.Profiles)
		q.count(q.nodes, u.Node, u.Model, u.Profiles)
	}
	return q
}

func (q *quota) count(m map[string]*storedProfiles, who, model string, n int) {
	u := m[who]
	if u == nil {
		u = &storedProfiles{models: map[string]struct{}{}}
		m[who] = u
	}
	u.models[model] = struct{}{}
	u.profiles += n
}

// errQuota is a refusal by a quota; final says whether sending the
// profile again can ever succeed.
type errQuota struct {
	reason Reason
	final  bool
	msg    string
}

func (e *errQuota) Error() string { return e.msg }

// check says whether rec may be stored now; nil means yes, and add must
// follow if it is.
func (q *quota) check(rec profile.Record, now time.Time) *errQuota {
	l := q.limits
	if err := q.over(q.users[rec.User], rec.Model, "user", rec.User, l.MaxModelsPerUser, l.MaxProfilesPerUser, "user"); err != nil {
		return err
	}
	if err := q.over(q.nodes[rec.Node], rec.Model, "node", rec.Node, l.MaxModelsPerNode, l.MaxProfilesPerNode, "node"); err != nil {
		return err
	}
	if t := q.refill(rec.Node, now); t.left < 1 {
		wait := time.Duration((1 - t.left) * float64(time.Hour) / float64(l.ProfilesPerNodePerHour)).Round(time.Second)
		return &errQuota{reason: ReasonRateLimited, msg: fmt.Sprintf("node %q is past its rate of new profiles (agent.profiles_per_node_per_hour %d); the agent retries, the next fits in %v",
			rec.Node, l.ProfilesPerNodePerHour, max(wait, time.Second))}
	}
	return nil
}

// over refuses a profile that would take u past its caps: a model new to
// u when it has maxModels, or any profile when it has maxProfiles.
func (q *quota) over(u *storedProfiles, model, kind, who string, maxModels, maxProfiles int, key string) *errQuota {
	if u == nil {
		return nil
	}
	if _, known := u.models[model]; !known && len(u.models) >= maxModels {
		return &errQuota{reason: ReasonQuota, final: true, msg: fmt.Sprintf("%s %q already has profiles of %d models (agent.max_models_per_%s %d); model %q is not stored",
			kind, who, len(u.models), key, maxModels, model)}
	}
	if u.profiles >= maxProfiles {
		return &errQuota{reason: ReasonQuota, final: true, msg: fmt.Sprintf("%s %q already has %d profiles stored (agent.max_profiles_per_%s %d); this profile of %q is not stored",
			kind, who, u.profiles, key, maxProfiles, model)}
	}
	return nil
}

// refill brings node's bucket up to now.
func (q *quota) refill(node string, now time.Time) *tokens {
	per := float64(q.limits.ProfilesPerNodePerHour)
	t := q.rate[node]
	if t == nil {
		t = &tokens{left: per, at: now}
		q.rate[node] = t
	}
	if d := now.Sub(t.at); d > 0 {
		t.left = min(per, t.left+per*d.Hours())
		t.at = now
	}
	return t
}

// add counts rec, which was just stored.
func (q *quota) add(rec profile.Record, now time.Time) {
	q.count(q.users, rec.User, rec.Model, 1)
	q.count(q.nodes, rec.Node, rec.Model, 1)
	q.refill(rec.Node, now).left--
}
