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
	// FlushEvery is how often model keys noted in memory reach SQLite.
	FlushEvery time.Duration
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

	srvMu sync.Mutex
	srv   *Server

	onJobEnd atomic.Pointer[JobEndFunc] // jobend.go

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
	store, err := profilestore.Open(cfg.DBPath)
	if err != nil {
		return nil, err
	}
	latest, err := store.LatestAll()
	if err != nil {
		store.Close()
		return nil, err
	}
	s := &Service{
		cfg:   cfg,
		log:   log,
		store: store,
		cache: profilestore.NewCache(latest),
		keys:  map[string]int{},
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	s.cfg.Server.OnProfile = func(rec profile.Record) { s.cache.Offer(rec) }
	s.cfg.Server.OnJobEnd = s.jobEnd
	log.Info("node-agent profiles loaded", keyModels, s.cache.Len(), keyPath, cfg.DBPath)
	if cfg.Addr != "" {
		if err := s.listen(); err != nil {
			log.Error("cannot listen for node agents; retrying", keyAddr, cfg.Addr, keyErr, err, keyEvery, cfg.RetryEvery)
		}
	}
	safego.Loop(log, "node-agent service", s.run, func() { close(s.done) })
	return s, nil
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
		case <-retry:
			if err := s.listen(); err != nil {
				s.log.Debug("still cannot listen for node agents", keyAddr, s.cfg.Addr, keyErr, err)
				continue
			}
			retry = nil
		}
	}
}

// Profile returns model's latest profile from memory: no lock is held
// while waiting and no I/O is done, so it is safe under slurmctld's locks.
func (s *Service) Profile(model string) (profile.Record, bool) { return s.cache.Profile(model) }

// NoteModelKey counts a job submitted with model key, for
// `lachesis-profiler missing`. Memory only; a goroutine writes the counts.
func (s *Service) NoteModelKey(key string) {
	if key == "" {
		return
	}
	s.keysMu.Lock()
	s.keys[key]++
	s.keysMu.Unlock()
}

// RecordModelKeys writes counts of submitted model keys now, for a caller
// that batches them itself (the core's writer goroutine); never call it
// under slurmctld's locks.
func (s *Service) RecordModelKeys(counts map[string]int, at time.Time) error {
	return s.store.NoteModelKeys(counts, at)
}

func (s *Service) flushKeys() {
	s.keysMu.Lock()
	keys := s.keys
	if len(keys) == 0 {
		s.keysMu.Unlock()
		return
	}
	s.keys = map[string]int{}
	s.keysMu.Unlock()
	if err := s.store.NoteModelKeys(keys, time.Now()); err != nil {
		s.log.Error("could not record submitted model keys", keyErr, err)
	}
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
