// Package profilestore keeps what node agents report in the controller's
// SQLite file (the ledger's file, cfg.DBPath, in WAL mode): model profiles,
// the model keys seen in submitted jobs, and the latest GPU telemetry of
// every node.
//
// A profile's id is its primary key, so storing a record twice stores it
// once: that is what makes an agent's retries safe (Put reports whether the
// row is new). Records are kept whole as JSON next to the columns that are
// queried, so `sqlite3 -readonly lachesis.db` shows an admin what a profile
// says.
//
// The store is used by the agent listener's goroutines and by the
// lachesis-profiler CLI (read-only); nothing here runs under slurmctld's
// locks. The job_submit plugin reads profiles from Cache, in memory.
package profilestore
