package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/policy/quota"
)

func TestQuotaDefaultsOff(t *testing.T) {
	c, err := Parse(strings.NewReader("log_level: info\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Quota.Accounts) != 0 || c.Quota.MaxReclaimPerPass != quota.DefaultMaxReclaimPerPass ||
		c.Quota.Source != QuotaFromYAML || c.Quota.Refresh != DefaultQuotaRefresh {
		t.Fatalf("defaults: %+v", c.Quota)
	}
}

func TestQuotaParsed(t *testing.T) {
	c, err := Parse(strings.NewReader(`
quota:
  max_reclaim_per_pass: 2
  accounts:
    Vision: "2 nodes of 8 GPUs"
    nlp: "16 GPUs in cells of 4"
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Quota.MaxReclaimPerPass != 2 || c.Quota.Accounts["vision"] != (quota.Spec{Cells: 2, CellGPUs: 8, Nodes: true}) ||
		c.Quota.Accounts["nlp"] != (quota.Spec{Cells: 4, CellGPUs: 4}) {
		t.Fatalf("parsed %+v", c.Quota)
	}
}

func TestQuotaErrorsNameTheKey(t *testing.T) {
	for yaml, key := range map[string]string{
		"quota:\n  max_reclaim_per_pass: 0\n":                          "quota.max_reclaim_per_pass",
		"quota:\n  max_reclaim_per_pass: 1000\n":                       "quota.max_reclaim_per_pass",
		"quota:\n  accounts:\n    vision: lots\n":                      "quota.accounts.vision",
		"quota:\n  accounts:\n    vision: \"10 GPUs in cells of 4\"\n": "quota.accounts.vision",
		"quota:\n  accounts:\n    \"a b\": \"1 GPU\"\n":                "quota.accounts",
		"quota:\n  acounts:\n    x: \"1 GPU\"\n":                       "acounts",
		"quota:\n  source: ldap\n":                                     "quota.source",
		"quota:\n  source: slurmdbd\n  accounts:\n    x: \"1 GPU\"\n":  "quota.source",
		"quota:\n  refresh: 10\n":                                      "quota.refresh",
		"quota:\n  refresh: 100000\n":                                  "quota.refresh",
		"quota:\n  refresh: .nan\n":                                    "quota.refresh",
	} {
		_, err := Parse(strings.NewReader(yaml))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key) {
			t.Errorf("%q: %v, want an error naming %s", yaml, err, key)
		}
	}
}

func TestQuotaFromSlurmdbdLeavesTheAccountsEmpty(t *testing.T) {
	c, err := Parse(strings.NewReader("quota:\n  source: Slurmdbd\n  refresh: 60\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Quota.Source != QuotaFromSlurmdbd || c.Quota.Refresh != time.Minute || len(c.Quota.Accounts) != 0 {
		t.Fatalf("parsed %+v", c.Quota)
	}
}
