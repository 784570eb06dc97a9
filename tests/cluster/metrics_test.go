package cluster_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestPrometheusScrapesCoreAndAgent sets metrics.listen in lachesis.yaml
// and node-agent.yaml, runs a job, and has a real Prometheus server (the
// Debian package scripts/install-deps.sh installs) scrape both endpoints;
// the series are read back through Prometheus's query API, as Grafana would.
func TestPrometheusScrapesCoreAndAgent(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed; run scripts/install-deps.sh")
	}
	coreAddr, agentAddr := freeTCPAddr(t), freeTCPAddr(t)
	e := startAgentClusterFull(t, "", "metrics:\n  listen: "+coreAddr+"\n", "metrics:\n  listen: "+agentAddr+"\n", nil)
	id := e.submit("-J", "scraped", "--gpus=1", "--wrap", "sleep 2")
	e.waitState(id, "COMPLETED", 60*time.Second)

	prom := startPrometheus(t, promBin, map[string]string{"lachesis-core": coreAddr, "lachesis-agent": agentAddr})
	for _, q := range []struct{ what, query string }{
		{"the core's pass histogram", "lachesis_pass_duration_seconds_count > 0"},
		{"the core's queue gauge", "lachesis_queue_jobs"},
		{"the core's agent listener counters", `lachesis_agent_reports_total{kind="telemetry"}`},
		{"the agent's spool depth", `lachesis_agent_spool_pending{job="lachesis-agent"}`},
		{"the agent's profiling runs", `lachesis_agent_profiling_runs_total{outcome="completed"}`},
		{"both targets up", `sum(up{job=~"lachesis-.*"}) == 2`},
	} {
		e.eventually(60*time.Second, q.what+" via Prometheus ("+q.query+")", func() (bool, string) {
			n, body := promQuery(prom, q.query)
			return n > 0, body
		})
	}
}

// startPrometheus runs a private Prometheus on loopback scraping targets
// (job name → host:port) every second, with its own storage; it is stopped
// when the test ends. It returns the server's address.
func startPrometheus(t *testing.T, bin string, targets map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
	for job, addr := range targets {
		cfg += fmt.Sprintf("  - job_name: %s\n    static_configs:\n      - targets: ['%s']\n", job, addr)
	}
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeTCPAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+conf, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	return addr
}

// promQuery runs an instant query and returns how many series it found,
// and the response for the failure message.
func promQuery(addr, query string) (int, string) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		return 0, string(body)
	}
	return len(r.Data.Result), string(body)
}
