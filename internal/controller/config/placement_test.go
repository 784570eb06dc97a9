package config

import (
	"errors"
	"strings"
	"testing"
)

const placementYAML = `
placement:
  enabled: true
  min_advantage: 1.5
  sensitive_below: 0.7
  models:
    ResNet-50:
      speed: {V100: 3.0, k80: 1.0}
      spread_ratio: 0.4
    lm:
      speed: {v100: 1.4, k80: 1.0}
`

func TestPlacementTableIsReadWithLowerCaseNames(t *testing.T) {
	c, err := Parse(strings.NewReader(placementYAML))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Placement
	if !p.Enabled || p.MinAdvantage != 1.5 || p.SensitiveBelow != 0.7 || p.FeaturePrefix != "gpu_" {
		t.Fatalf("got %+v", p)
	}
	if m := p.Models["resnet-50"]; m.Speed["v100"] != 3 || m.SpreadRatio != 0.4 {
		t.Fatalf("resnet-50 row %+v", m)
	}
	if m := p.Models["lm"]; m.SpreadRatio != 0 || m.Speed["k80"] != 1 {
		t.Fatalf("lm row %+v", m)
	}
}

func TestPlacementErrorsNameTheKey(t *testing.T) {
	cases := []struct{ name, yaml, key string }{
		{"negative speed is rejected", "placement:\n  models:\n    bert:\n      speed: {a: -1}\n", "placement.models.bert.speed.a"},
		{"spread ratio over one is rejected", "placement:\n  models:\n    bert:\n      speed: {a: 1}\n      spread_ratio: 2\n", "placement.models.bert.spread_ratio"},
		{"unknown model key is rejected", "placement:\n  models:\n    bert:\n      sped: {a: 1}\n", "sped"},
		{"advantage below one is rejected", "placement:\n  min_advantage: 0.9\n", "placement.min_advantage"},
		{"text speed is rejected", "placement:\n  models:\n    bert:\n      speed: {a: fast}\n", "speed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.yaml))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("err = %v, want ErrInvalid naming %q", err, c.key)
			}
		})
	}
}
