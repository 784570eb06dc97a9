package agentserver

import (
	"time"

	"github.com/lachesis-sched/lachesis/profile"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
)

// Config tunes a Server. Zero durations and limits take the defaults.
type Config struct {
	MaxFrameBytes int
	// SlurmUID and AllowedUIDs may report, besides root.
	SlurmUID    uint32
	AllowedUIDs []uint32
	// MaxConns caps concurrent agent connections; more are closed at once.
	MaxConns int
	// MaxConnsPerPeer caps one source address's connections, so one host
	// cannot take every slot. An agent uses one connection at a time. A
	// newcomer to a full address takes the slot of that address's oldest
	// unauthenticated connection: users of the agent's node share its
	// address, and must not keep it out with half-open connections.
	MaxConnsPerPeer int
	// AuthTimeout is how long a peer has to send a frame's header and
	// credential: from accept for the first frame, from its first byte
	// for later ones. Until then the peer is unauthenticated, and holds a
	// slot no longer than this.
	AuthTimeout time.Duration
	// IdleTimeout is how long an authenticated connection may wait before
	// its next frame begins; FrameTimeout is how long a body may take to
	// arrive once its credential is verified.
	IdleTimeout  time.Duration
	FrameTimeout time.Duration
	// BodyBudget bounds the bytes of all bodies held in memory at once
	// (at least MaxFrameBytes); a report that cannot get its share within
	// AuthTimeout is refused as busy and retried by its agent.
	BodyBudget int
	// WriteTimeout bounds sending an ack to a peer that does not read.
	WriteTimeout time.Duration
	// OnProfile is called (outside any lock) with each newly stored profile.
	OnProfile func(profile.Record)
	// OnJobEnd is called (outside any lock) with each valid job-end report;
	// false means nobody could take it yet, and the agent is told to retry.
	OnJobEnd func(wire.JobEndReport) bool
	// OnJobUsage is called (outside any lock) with each valid per-job GPU
	// usage report; false means nobody could take it yet (retried).
	OnJobUsage func(*wire.JobUsageReport) bool
	// LogsPerSecond caps rejection log lines; the excess is counted and
	// summarised, so a flood cannot fill slurmctld's log.
	LogsPerSecond int
	// Quotas bound the profiles stored per user and node and their rate
	// per node (zero fields take lachesis.yaml's defaults).
	Quotas config.ProfileQuotas
}

// Defaults used for zero Config fields.
const (
	DefaultMaxConns        = 64
	DefaultMaxConnsPerPeer = 8
	DefaultAuthTimeout     = 5 * time.Second
	DefaultBodyBudget      = 8 << 20
	DefaultIdleTimeout     = 30 * time.Second
	DefaultFrameTimeout    = 30 * time.Second
	DefaultWriteTimeout    = 10 * time.Second
	DefaultLogsPerSecond   = 20
)

// ConfigFrom makes a Config from lachesis.yaml's agent section.
func ConfigFrom(a config.Agent, slurmUID uint32) Config {
	return Config{MaxFrameBytes: a.MaxFrameBytes, SlurmUID: slurmUID, AllowedUIDs: a.AllowedUIDs, Quotas: a.Quotas}
}

func (c *Config) fillDefaults() {
	orDefault(&c.MaxFrameBytes, config.Default().Agent.MaxFrameBytes)
	c.MaxFrameBytes = min(c.MaxFrameBytes, wire.MaxBodyBytes)
	orDefault(&c.MaxConns, DefaultMaxConns)
	orDefault(&c.MaxConnsPerPeer, DefaultMaxConnsPerPeer)
	orDefault(&c.AuthTimeout, DefaultAuthTimeout)
	orDefault(&c.BodyBudget, DefaultBodyBudget)
	c.BodyBudget = max(c.BodyBudget, c.MaxFrameBytes)
	orDefault(&c.IdleTimeout, DefaultIdleTimeout)
	orDefault(&c.FrameTimeout, DefaultFrameTimeout)
	orDefault(&c.WriteTimeout, DefaultWriteTimeout)
	orDefault(&c.LogsPerSecond, DefaultLogsPerSecond)
	q, d := &c.Quotas, config.Default().Agent.Quotas
	orDefault(&q.MaxModelsPerUser, d.MaxModelsPerUser)
	orDefault(&q.MaxProfilesPerUser, d.MaxProfilesPerUser)
	orDefault(&q.MaxModelsPerNode, d.MaxModelsPerNode)
	orDefault(&q.MaxProfilesPerNode, d.MaxProfilesPerNode)
	orDefault(&q.ProfilesPerNodePerHour, d.ProfilesPerNodePerHour)
}

// orDefault sets an unset (zero or negative) setting to its default.
func orDefault[T int | int64 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
