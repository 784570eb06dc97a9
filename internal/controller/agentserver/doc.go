// Package agentserver is the controller's end of the node-agent protocol:
// a TCP listener inside slurmctld's Go core that accepts length-framed
// msgpack reports (package wire), checks their munge credentials, stores
// profiles and telemetry (package profilestore) and acknowledges each
// report.
//
// It runs in goroutines of its own and never under slurmctld's locks. A
// peer can cost it little. Nothing is decoded before a frame's munge
// credential is verified: an unauthenticated peer gets to send a 12-byte
// header and at most wire.MaxCredLen bytes of credential, within
// AuthTimeout of connecting, and is then closed (no slowloris). Connections
// are capped in all (MaxConns) and per source address (MaxConnsPerPeer), so
// one host cannot take every slot; a newcomer to a full address evicts
// that address's oldest unauthenticated connection (past a short grace),
// since users of an agent's node share its address. With every slot
// taken, a newcomer evicts the oldest connection the server has read and
// that has not authenticated, and waits (up to a second) for connections
// not read yet rather than be refused. An authenticated body is read within
// FrameTimeout into a shared BodyBudget of bytes, and decoded by at most
// two goroutines at a time under wire's depth and size limits. A panic in
// a connection's goroutine ends that connection only. Every rejection is
// counted by reason and logged with constant keys ("peer", "reason",
// "err"), so an admin can grep slurmctld's log for "agent report rejected".
//
// Only credentials made by root, SlurmUser or a uid listed in
// agent.allowed_uids are accepted, and a credential must carry the digest
// of the frame it came in (wire.Digest), so it vouches for that body alone.
// Even then a profile's numbers are checked (profile.Record.Check: a best
// case of 1 to 512 CPUs and 64 MiB to 16 TiB per GPU, finite): a trusted
// agent that is broken must not size every job of a model to 1 MB per GPU.
// Such a profile is refused with "implausible_profile", counted and
// logged; one stored before the check is ignored when the service loads.
//
// What agents may store is bounded (Config.Quotas, lachesis.yaml's agent
// quotas): models and profiles per user and per node, and new profiles per
// node per hour. A capped profile is refused for good (Ack.Final: the agent
// stops retrying), a rate-limited one for now.
//
// Service bundles what the core needs: the store on the ledger's file, the
// in-memory profile cache job_submit reads under slurmctld's locks, and the
// listener, re-tried in the background if its port is taken.
package agentserver
