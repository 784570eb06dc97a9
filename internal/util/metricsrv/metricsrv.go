package metricsrv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lachesis-sched/lachesis/internal/util/safego"
)

// ErrListen wraps a failure to open the metrics address.
var ErrListen = errors.New("metrics listener")

// Path is where the registry is served.
const Path = "/metrics"

// Log keys.
const (
	keyAddr = "addr"
	keyErr  = "err"
)

// Server is a running /metrics endpoint.
type Server struct {
	http *http.Server
	ln   net.Listener
	done chan struct{}
}

// ValidateAddr checks a metrics.listen value: "" (off) or host:port.
func ValidateAddr(key, addr string) error {
	if addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%s must be host:port (e.g. \":9830\"), got %q", key, addr)
	}
	return nil
}

// Start listens on addr and serves reg on Path until Close.
func Start(addr string, reg *prometheus.Registry, log *slog.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle(Path, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// A collector that fails (e.g. the spool is busy) costs its own
		// series, not the whole scrape.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	s := &Server{
		http: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      15 * time.Second,
			IdleTimeout:       60 * time.Second,
			MaxHeaderBytes:    16 << 10,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	serve := func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", keyAddr, ln.Addr().String(), keyErr, err)
		}
	}
	safego.Loop(log, "metrics listener", serve, func() { close(s.done) })
	log.Info("serving metrics", keyAddr, ln.Addr().String())
	return s, nil
}

// Addr is the address actually listened on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the listener and waits, briefly, for scrapes in progress.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	<-s.done
	return err
}

// Keeper serves /metrics at an address it may have to wait for (Keep).
type Keeper struct {
	mu     sync.Mutex
	srv    *Server // nil until the address could be bound
	closed bool
	stop   chan struct{}
	done   chan struct{}
}

// Keep serves reg at addr like Start, for a process that takes over from
// another one still listening there: from Slurm 24.05, `scontrol
// reconfigure` starts a new slurmctld while the old one, which keeps its
// listeners until the new one is up, waits. While addr is taken Keep logs
// it once and tries again every `every`, until it binds or Close is called.
func Keep(addr string, reg *prometheus.Registry, log *slog.Logger, every time.Duration) *Keeper {
	k := &Keeper{stop: make(chan struct{}), done: make(chan struct{})}
	s, err := Start(addr, reg, log)
	if err == nil {
		k.srv = s
		close(k.done)
		return k
	}
	log.Info("metrics address still taken (the slurmctld this one replaces holds it until it exits); trying again", keyAddr, addr, keyErr, err)
	retry := func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-t.C:
			}
			s, err := Start(addr, reg, log)
			if err != nil {
				continue
			}
			k.mu.Lock()
			if k.closed {
				k.mu.Unlock()
				s.Close()
				return
			}
			k.srv = s
			k.mu.Unlock()
			return
		}
	}
	safego.Loop(log, "metrics listener (waiting for its address)", retry, func() { close(k.done) })
	return k
}

// Serving reports whether the address is bound and served.
func (k *Keeper) Serving() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.srv != nil
}

// Close stops waiting for the address, or serving it.
func (k *Keeper) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	close(k.stop)
	k.mu.Unlock()
	<-k.done
	k.mu.Lock()
	s := k.srv
	k.mu.Unlock()
	if s != nil {
		return s.Close()
	}
	return nil
}
