package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/yamlconf"
	"github.com/lachesis-sched/lachesis/node-agent/config"
)

func host() (string, error) { return "lnode7.cluster.example", nil }

func parse(t *testing.T, yaml string) (config.Config, error) {
	t.Helper()
	return config.Parse(strings.NewReader(yaml), host)
}

func TestMinimalFileTakesDefaults(t *testing.T) {
	got, err := parse(t, "controller: ctl:6830\n")
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Controller = "ctl:6830"
	want.Node = "lnode7"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestShippedFileParsesToTheDefaults(t *testing.T) {
	fh, err := os.Open(filepath.Join("..", "..", "etc", "node-agent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	got, err := config.Parse(fh, host)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Controller = "slurmctld.example.org:6830"
	want.Node = "lnode7"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("etc/node-agent.yaml does not document the defaults:\n got  %+v\nwant %+v", got, want)
	}
}

func TestValuesAreRead(t *testing.T) {
	got, err := parse(t, `
controller: 10.0.0.1:7000
munge_socket: /m/sock
spool: /s/spool.db
socket: /r/agent.sock
node: n1
allow_root_profiling: true
node_gpus: 8
gpu_type: A100
telemetry_interval: 0
max_point_seconds: 30
min_point_seconds: 2
max_sweep_seconds: 900
log_level: DEBUG
delivery:
  retry_min: 0.5
  retry_max: 5
  timeout: 2
  max_frame_bytes: 4096
metrics:
  listen: ":9831"
fake_gpu:
  dir: /run/lachesis/fakegpu
  gpus: 4
`)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Config{
		Controller: "10.0.0.1:7000", MungeSocket: "/m/sock", Spool: "/s/spool.db", Socket: "/r/agent.sock",
		Node: "n1", AllowRootProfiling: true, NodeGPUs: 8, GPUType: "a100", TelemetryInterval: 0, LogLevel: "debug",
		MaxPointDuration: 30 * time.Second, MinPointDuration: 2 * time.Second, MaxSweepDuration: 15 * time.Minute,
		Delivery:      config.Delivery{RetryMin: 500 * time.Millisecond, RetryMax: 5 * time.Second, Timeout: 2 * time.Second, MaxFrameBytes: 4096},
		MetricsListen: ":9831",
		FakeGPU:       config.FakeGPU{Dir: "/run/lachesis/fakegpu", GPUs: 4},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestBadFilesAreRejected(t *testing.T) {
	tests := []struct {
		name, yaml, mention string
	}{
		{"missing controller is rejected", "node: n1\n", "controller"},
		{"controller without port is rejected", "controller: ctl\n", "controller"},
		{"unknown key is rejected", "controller: c:1\ncontroler: c:2\n", "controler"},
		{"relative spool is rejected", "controller: c:1\nspool: spool.db\n", "spool"},
		{"overlong socket path is rejected", "controller: c:1\nsocket: /" + strings.Repeat("x", 120) + "\n", "socket"},
		{"negative telemetry interval is rejected", "controller: c:1\ntelemetry_interval: -1\n", "telemetry_interval"},
		{"retry_max below retry_min is rejected", "controller: c:1\ndelivery:\n  retry_min: 10\n  retry_max: 1\n", "retry_max"},
		{"tiny ack limit is rejected", "controller: c:1\ndelivery:\n  max_frame_bytes: 10\n", "max_frame_bytes"},
		{"bad log level is rejected", "controller: c:1\nlog_level: loud\n", "log_level"},
		{"negative node_gpus is rejected", "controller: c:1\nnode_gpus: -2\n", "node_gpus"},
		{"GPU type with an operator is rejected", "controller: c:1\ngpu_type: a|b\n", "gpu_type"},
		{"wrong type is rejected", "controller: c:1\ndelivery:\n  timeout: soon\n", "timeout"},
		{"zero max_point_seconds is rejected", "controller: c:1\nmax_point_seconds: 0\n", "max_point_seconds"},
		{"a month of max_sweep_seconds is rejected", "controller: c:1\nmax_sweep_seconds: 2592000\n", "max_sweep_seconds"},
		{"min_point_seconds under 0.1 is rejected", "controller: c:1\nmin_point_seconds: 0.001\n", "min_point_seconds"},
		{"min_point_seconds above max_point_seconds is rejected", "controller: c:1\nmax_point_seconds: 10\nmin_point_seconds: 20\n", "min_point_seconds"},
		{"max_sweep_seconds below max_point_seconds is rejected", "controller: c:1\nmax_point_seconds: 600\nmax_sweep_seconds: 60\n", "max_sweep_seconds"},
		{"metrics address without a port is rejected", "controller: c:1\nmetrics:\n  listen: localhost\n", "metrics.listen"},
		{"relative fake_gpu.dir is rejected", "controller: c:1\nfake_gpu:\n  dir: fake\n  gpus: 1\n", "fake_gpu.dir"},
		{"fake_gpu.dir without GPUs is rejected", "controller: c:1\nfake_gpu:\n  dir: /f\n", "fake_gpu.gpus"},
		{"fake_gpu.gpus over the bound is rejected", "controller: c:1\nfake_gpu:\n  dir: /f\n  gpus: 65\n", "fake_gpu.gpus"},
		{"fake_gpu.gpus without a dir is rejected", "controller: c:1\nfake_gpu:\n  gpus: 2\n", "fake_gpu.gpus"},
		{"not YAML is rejected", "controller: [\n", "YAML"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.yaml)
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("got %v; want ErrInvalid mentioning %q", err, tc.mention)
			}
		})
	}
}

func TestHostnameFailureNeedsAnExplicitNode(t *testing.T) {
	_, err := config.Parse(strings.NewReader("controller: c:1\n"), func() (string, error) { return "", errors.New("no uts") })
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("got %v", err)
	}
}

func TestLoadRefusesEmptyAndOversizedFiles(t *testing.T) {
	tests := []struct {
		name, text string
		want       error
	}{
		{"empty file is refused", "", yamlconf.ErrEmpty},
		{"comments-only file is refused", "# controller: ctl:6830\n\n", yamlconf.ErrEmpty},
		{"file over 1 MiB is refused", "controller: c:1\n# " + strings.Repeat("x", yamlconf.MaxBytes) + "\n", yamlconf.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "node-agent.yaml")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := config.Load(p)
			if !errors.Is(err, tc.want) || !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), p) {
				t.Fatalf("got %v; want %v naming %s", err, tc.want, p)
			}
		})
	}
}

func TestLoadMissingFileIsAnErrorNamingIt(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := config.Load(p)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), p) {
		t.Fatalf("got %v; want ErrNotExist naming %s", err, p)
	}
}
