package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/policy/priority"
)

const gpuTypesYAML = `
tiresias:
  effective_service: true
gpu_types:
  A100: {speed: 2.0}
  v100: {speed: 1}
placement:
  models:
    bert:
      speed: {a100: 3, v100: 1}
`

func TestGPUTypesAndEffectiveServiceAreRead(t *testing.T) {
	c, err := Parse(strings.NewReader(gpuTypesYAML))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tiresias.EffectiveService || c.GPUTypes["a100"] != 2 || c.GPUTypes["v100"] != 1 || len(c.GPUTypes) != 2 {
		t.Fatalf("effective_service %v, gpu_types %v", c.Tiresias.EffectiveService, c.GPUTypes)
	}
	sp := c.Speeds(map[string]map[string]float64{"gpt": {"a100": 90, "v100": 30}})
	cases := []struct {
		model, typ string
		want       float64
		src        priority.SpeedSource
	}{
		{"gpt", "a100", 3, priority.SpeedProfiled},
		{"bert", "a100", 3, priority.SpeedTable},
		{"other", "a100", 2, priority.SpeedTypeDefault},
	}
	for _, tc := range cases {
		if v, src := sp.Speed(tc.model, tc.typ); v != tc.want || src != tc.src {
			t.Fatalf("%s on %s: %v from %s, want %v from %s", tc.model, tc.typ, v, src, tc.want, tc.src)
		}
	}
}

func TestEffectiveServiceIsOffByDefault(t *testing.T) {
	c, err := Parse(strings.NewReader("pass_interval: 5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tiresias.EffectiveService || len(c.GPUTypes) != 0 {
		t.Fatalf("defaults: effective_service %v, gpu_types %v; want off and none", c.Tiresias.EffectiveService, c.GPUTypes)
	}
}

func TestGPUTypeErrorsNameTheKey(t *testing.T) {
	cases := []struct{ name, yaml, key string }{
		{"zero speed is rejected", "gpu_types:\n  a100: {speed: 0}\n", "gpu_types.a100.speed"},
		{"text speed is rejected", "gpu_types:\n  a100: {speed: fast}\n", "speed"},
		{"type with an operator is rejected", "gpu_types:\n  'a|b': {speed: 1}\n", "gpu_types.a|b"},
		{"unknown key under a type is rejected", "gpu_types:\n  a100: {sped: 1}\n", "sped"},
		{"text for effective_service is rejected", "tiresias:\n  effective_service: maybe\n", "effective_service"},
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
