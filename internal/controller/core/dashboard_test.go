package core

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The shipped Grafana dashboard must query only metrics the core
// registers, so that renaming one breaks this test, not an admin's panel.
func TestGrafanaDashboardQueriesRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile("../../../etc/grafana/lachesis-core.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	registered := registeredNames(t)
	used := map[string]bool{}
	metricName := regexp.MustCompile(`\blachesis_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: %q queries no lachesis metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				base := n
				for _, suf := range []string{"_bucket", "_count", "_sum"} {
					if s, ok := strings.CutSuffix(n, suf); ok && registered[s] {
						base = s
					}
				}
				if !registered[base] {
					t.Errorf("panel %q queries %s, which the core does not register", p.Title, n)
				}
				used[base] = true
			}
		}
	}
	for _, n := range []string{MetricPassDuration, MetricQueueJobs, MetricDemotions, MetricPromotions,
		MetricPreemptions, MetricSizing, MetricAgentRejected} {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}

// registeredNames describes every collector of the core's registry.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	m := newMetrics()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	names := map[string]bool{}
	ch := make(chan *prometheus.Desc, 64)
	for _, c := range m.collectors {
		c.Describe(ch)
	}
	close(ch)
	for d := range ch {
		if s := fqName.FindStringSubmatch(d.String()); s != nil {
			names[s[1]] = true
		}
	}
	if !names[MetricPassDuration] || !names[MetricAgentRejected] {
		t.Fatalf("describing the collectors found only %v", names)
	}
	return names
}
