package metricsrv_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lachesis-sched/lachesis/internal/util/metricsrv"
)

func TestServesTheRegistryUntilClosed(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_things_total", Help: "things"})
	reg.MustRegister(c)
	c.Add(3)
	s, err := metricsrv.Start("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.Addr().String() + metricsrv.Path
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "test_things_total 3") {
		t.Fatalf("scrape lacks the counter:\n%s", body)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(url); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestTakenAddressIsAnError(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := metricsrv.Start("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := metricsrv.Start(s.Addr().String(), reg, slog.New(slog.DiscardHandler)); !errors.Is(err, metricsrv.ErrListen) {
		t.Fatalf("got %v, want ErrListen", err)
	}
}

func TestValidateAddr(t *testing.T) {
	tests := []struct {
		name, addr string
		ok         bool
	}{
		{"empty is off and valid", "", true},
		{"port only is valid", ":9830", true},
		{"host and port is valid", "127.0.0.1:9830", true},
		{"no port is invalid", "localhost", false},
		{"empty port is invalid", "localhost:", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := metricsrv.ValidateAddr("metrics.listen", tt.addr); (err == nil) != tt.ok {
				t.Fatalf("ValidateAddr(%q) = %v", tt.addr, err)
			}
		})
	}
}

// A slurmctld that takes over from another (Slurm 24.05's reconfigure)
// serves the metrics address as soon as the old one lets it go.
func TestKeepServesTheAddressOnceItsHolderLetsItGo(t *testing.T) {
	reg := prometheus.NewRegistry()
	old, err := metricsrv.Start("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	addr := old.Addr().String()
	k := metricsrv.Keep(addr, reg, slog.New(slog.DiscardHandler), 10*time.Millisecond)
	defer k.Close()
	if k.Serving() {
		t.Fatal("serving an address another server holds")
	}
	old.Close()
	deadline := time.Now().Add(5 * time.Second)
	for !k.Serving() {
		if time.Now().After(deadline) {
			t.Fatal("the address was let go, Keep never bound it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + metricsrv.Path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", metricsrv.Path, resp.Status)
	}
}

// Closed while it waits, Keep never binds.
func TestKeepClosedWhileWaitingStopsTrying(t *testing.T) {
	reg := prometheus.NewRegistry()
	old, err := metricsrv.Start("127.0.0.1:0", reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	k := metricsrv.Keep(old.Addr().String(), reg, slog.New(slog.DiscardHandler), 10*time.Millisecond)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	old.Close()
	time.Sleep(50 * time.Millisecond)
	if k.Serving() {
		t.Fatal("a closed Keeper bound the address")
	}
}
