package agentserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/util/safego"
	"github.com/lachesis-sched/lachesis/internal/util/sqlitedb"
	"github.com/lachesis-sched/lachesis/profile"
)

// ServiceConfig says where a Service listens and stores.
type ServiceConfig struct {
	Addr     string // host:port
	DBPath   string // the core's SQLite file
	Server   Config
	Verifier munge.Verifier
	// RetryEvery is how often a listener that could not bind tries again.
	RetryEvery time.Duration
	// FlushEvery is how often model keys noted in memory reach SQLite,
	// and how often the file is checked for deletion or replacement.
	FlushEvery time.Duration
	// Owner gets the SQLite file when slurmctld runs as root
	// (sqlitedb.NoOwner leaves it alone).
	Owner int
}

// Service is the core's side of the node agents: the profile store, the
// in-memory profile cache and the listener.
type Service struct {
	cfg   ServiceConfig
	log   *slog.Logger
	store *profilestore.Store
	cache *profilestore.Cache

	keysMu sync.Mutex
	keys   map[string]int // model keys noted since the last flush
	// keysDropped: new keys not counted since the last flush, the bound
	// reached (MaxNotedModelKeys).
	keysDropped int

	srvMu sync.Mutex
	srv   *Server

	onJobEnd   atomic.Pointer[JobEndFunc]   // jobend.go
	onJobUsage atomic.Pointer[JobUsageFunc] // jobusage.go

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// OpenService starts the agent side of the core from lachesis.yaml and
// what slurmctld said at start-up: munged's socket from AuthInfo, and
// SlurmUser, who may report besides root.
func OpenService(cfg config.Config, authInfo string, slurmUID uint32, log *slog.Logger) (*Service, error) {
	return NewService(ServiceConfig{
		Addr:     cfg.Agent.Listen,
		DBPath:   cfg.DBPath,
		Owner:    int(slurmUID),
		Server:   ConfigFrom(cfg.Agent, slurmUID),
		Verifier: &munge.Client{Socket: munge.SocketFromAuthInfo(authInfo)},
	}, log)
}

// NewService opens the store, loads every model's latest profile and
// starts listening, unless Addr is empty: then profiles already stored
// still size jobs and model keys are still recorded, but no agent can
// report. If the address cannot be bound (a port still held by
// a previous slurmctld), it logs why and keeps trying in the background:
// slurmctld must not fail to start over a node-agent port.
func NewService(cfg ServiceConfig, log *slog.Logger) (*Service, error) {
	if cfg.RetryEvery <= 0 {
		cfg.RetryEvery = 10 * time.Second
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 10 * time.Second
	}
	if cfg.Owner == 0 {
		cfg.Owner = sqlitedb.NoOwner // root owns it already; the zero value means unset
	}
	store, err := profilestore.OpenOwned(cfg.DBPath, cfg.Owner)
	if err != nil {
		return nil, err
	}
	owned, published, byType, err := loadProfiles(store, log)
	if err != nil {
		store.Close()
		return nil, err
	}
	s := &Service{
		cfg:   cfg,
		log:   log,
		store: store,
		cache: profilestore.NewCache(owned, published, byType),
		keys:  map[string]int{},
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	s.cfg.Server.OnProfile = func(rec profile.Record) { s.cache.Offer(rec) }
	s.cfg.Server.OnJobEnd = s.jobEnd
	s.cfg.Server.OnJobUsage = s.jobUsage
	log.Info("node-agent profiles loaded", keyModels, s.cache.Len(), keyPath, cfg.DBPath)
	if cfg.Addr != "" {
		if err := s.listen(); err != nil {
			log.Error("cannot listen for node agents; retrying", keyAddr, cfg.Addr, keyErr, err, keyEvery, cfg.RetryEvery)
		}
	}
	safego.Loop(log, "node-agent service", s.run, func() { close(s.done) })
	return s, nil
}

// loadProfiles reads every user's latest profile of each model, the
// published ones and their per-type throughputs. Records stored before
// profiles were checked at ingest must not size jobs either: they are left
// out.
func loadProfiles(store *profilestore.Store, log *slog.Logger) (owned []profile.Record, published map[string]profile.Record, byType []profile.Record, err error) {
	usable := func(rec profile.Record) bool {
		if err := rec.Check(); err != nil {
			log.Warn("ignoring a stored profile", keyModel, rec.Model, keyID, rec.ID, keyErr, err)
			return false
		}
		return true
	}
	all, err := store.LatestOwned()
	if err != nil {
		return nil, nil, nil, err
	}
	for _, rec := range all {
		if usable(rec) {
			owned = append(owned, rec)
		}
	}
	if published, err = store.LatestPublished(); err != nil {
		return nil, nil, nil, err
	}
	for model, rec := range published {
		if !usable(rec) {
			delete(published, model)
		}
	}
	if byType, err = store.LatestByType(); err != nil {
		return nil, nil, nil, err
	}
	return owned, published, byType, nil
}

// reloadPublished picks up what an admin published since the last look
// (lachesis-profiler publish writes the file, not to slurmctld).
func (s *Service) reloadPublished() {
	published, err := s.store.LatestPublished()
	if err != nil {
		s.log.Warn("cannot reload published profiles", keyErr, err)
		return
	}
	for model, rec := range published {
		if rec.Check() != nil {
			delete(published, model)
		}
	}
	byType, err := s.store.LatestByType()
	if err != nil {
		s.log.Warn("cannot reload published profiles", keyErr, err)
		return
	}
	s.cache.SetPublished(published, byType)
}

// listen starts the server unless it runs.
func (s *Service) listen() error {
	srv, err := Start(context.Background(), s.cfg.Addr, s.cfg.Server, s.cfg.Verifier, s.store, s.log)
	if err != nil {
		return err
	}
	s.srvMu.Lock()
	s.srv = srv
	s.srvMu.Unlock()
	return nil
}

// run flushes model keys and, while the listener could not bind, retries
// it. It returns when the service closes.
func (s *Service) run() {
	var retry <-chan time.Time
	if s.cfg.Addr != "" && s.Server() == nil {
		t := time.NewTicker(s.cfg.RetryEvery)
		defer t.Stop()
		retry = t.C
	}
	flush := time.NewTicker(s.cfg.FlushEvery)
	defer flush.Stop()
	for {
		select {
		case <-s.stop:
			s.flushKeys()
			return
		case <-flush.C:
			s.flushKeys()
			s.reloadPublished()
		case <-retry:
			if err := s.listen(); err != nil {
				s.log.Debug("still cannot listen for node agents", keyAddr, s.cfg.Addr, keyErr, err)
				continue
			}
			retry = nil
		}
	}
}

// Profile returns the profile that sizes a job of user uid naming model
// (the user's own, else the published one) from memory: no lock is held
// while waiting and no I/O is done, so it is safe under slurmctld's locks.
func (s *Service) Profile(model string, uid uint32) (profile.Record, bool) {
	return s.cache.Profile(model, uid)
}

// Throughputs is model → GPU type → per-GPU throughput of the model's
// latest profile on that type, from memory (shared: do not modify it);
// safe under slurmctld's locks like Profile.
func (s *Service) Throughputs() map[string]map[string]float64 { return s.cache.Throughputs() }

// NoteModelKey counts a job submitted with model key, for
// `lachesis-profiler missing`. Memory only; a goroutine writes the counts.
// At most MaxNotedModelKeys distinct keys wait in memory: while the file
// cannot be written they are kept for the next flush, and a user
// submitting job after job under new names must not grow slurmctld's
// memory without end; a new key past the bound is not counted (logged at
// the next flush).
func (s *Service) NoteModelKey(key string) {
	if key == "" {
		return
	}
	s.keysMu.Lock()
	s.noteKeyLocked(key, 1)
	s.keysMu.Unlock()
}

// MaxNotedModelKeys bounds the distinct model keys held in memory between
// flushes (NoteModelKey).
const MaxNotedModelKeys = 4096

// noteKeyLocked adds n jobs to key, within MaxNotedModelKeys. Caller holds
// keysMu.
func (s *Service) noteKeyLocked(key string, n int) {
	if _, ok := s.keys[key]; !ok && len(s.keys) >= MaxNotedModelKeys {
		s.keysDropped++
		return
	}
	s.keys[key] += n
}

// RecordModelKeys writes counts of submitted model keys now, for a caller
// that batches them itself (the core's writer goroutine); never call it
// under slurmctld's locks.
func (s *Service) RecordModelKeys(counts map[string]int, at time.Time) error {
	return s.store.NoteModelKeys(counts, at)
}

// flushKeys writes the model keys noted so far. Keys that cannot be
// written go back into memory (added to any noted since) and are tried
// again at the next flush: a full or read-only disk delays `missing`, it
// does not empty it.
func (s *Service) flushKeys() {
	fileErr := s.checkFile()
	s.keysMu.Lock()
	keys, dropped := s.keys, s.keysDropped
	s.keysDropped = 0
	if len(keys) == 0 {
		s.keysMu.Unlock()
		return
	}
	s.keys = map[string]int{}
	s.keysMu.Unlock()
	if dropped > 0 {
		s.log.Warn("model keys not counted: too many distinct keys waiting to be written", "bound", MaxNotedModelKeys, "dropped", dropped)
	}
	err := fileErr // the file is gone and not reopened: writing would lose them
	if err == nil {
		err = s.store.NoteModelKeys(keys, time.Now())
	}
	if err != nil {
		s.log.Error("could not record submitted model keys; keeping them for the next try", keyErr, err, keyModels, len(keys))
		s.keysMu.Lock()
		for k, n := range keys {
			s.noteKeyLocked(k, n)
		}
		s.keysMu.Unlock()
	}
}

// checkFile reopens the SQLite file when it was deleted or replaced (the
// ledger shares it and recreates it too) and stores every cached profile
// again, so sizing survives the next restart. Model keys written before
// are lost with the old file; those noted since are written to the new one.
// It returns an error while the file is gone and cannot be reopened.
func (s *Service) checkFile() error {
	err := s.store.CheckFile()
	if err == nil {
		return nil
	}
	if !errors.Is(err, sqlitedb.ErrReplaced) {
		s.log.Error("cannot check the profile file", keyErr, err)
		return err
	}
	s.log.Error("PROFILE FILE DELETED OR REPLACED; reopening it and storing cached profiles again", keyErr, err, keyPath, s.cfg.DBPath)
	if err := s.store.Reopen(); err != nil {
		s.log.Error("cannot reopen the profile file; retrying", keyErr, err, keyPath, s.cfg.DBPath)
		return err
	}
	n := 0
	for _, rec := range s.cache.All() {
		if _, err := s.store.Put(rec); err != nil {
			s.log.Error("cannot store a cached profile again", keyErr, err, keyModel, rec.Model)
			continue
		}
		n++
	}
	// Published ones are published again, or the next reload of the new
	// file would drop them from sizing.
	for _, rec := range s.cache.Published() {
		if _, err := s.store.Put(rec); err != nil {
			s.log.Error("cannot store a published profile again", keyErr, err, keyModel, rec.Model)
			continue
		}
		if _, err := s.store.Publish(rec.Model, rec.ID); err != nil {
			s.log.Error("cannot publish a profile again", keyErr, err, keyModel, rec.Model)
		}
	}
	s.log.Warn("profile file reopened; cached profiles stored again", keyModels, n, keyPath, s.cfg.DBPath)
	return nil
}

// Server is the running listener, nil while it could not bind.
func (s *Service) Server() *Server {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.srv
}

// Close stops the listener, writes pending model keys and closes the store.
func (s *Service) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
		if srv := s.Server(); srv != nil {
			if e := srv.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
				err = e
			}
		}
		err = errors.Join(err, s.store.Close())
	})
	return err
}
