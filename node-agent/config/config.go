package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/util/metricsrv"
	"github.com/lachesis-sched/lachesis/internal/util/yamlconf"
)

// ErrInvalid is wrapped by every parse or validation error.
var ErrInvalid = errors.New("invalid node-agent config")

// gpuTypePat: what Slurm's GRES type names (and lachesis.yaml's
// gpu_types) may be.
var gpuTypePat = regexp.MustCompile(`^[a-z0-9_.-]{1,64}$`)

// MaxFakeGPUs bounds fake_gpu.gpus (telemetry.MaxFakeGPUs; config does
// not import telemetry, which links NVML).
const MaxFakeGPUs = 64

// DefaultPath is where the systemd unit points -config.
const DefaultPath = "/etc/lachesis/node-agent.yaml"

// Config is the agent's whole, validated configuration.
type Config struct {
	// Controller is the host:port of the core's listener (agent.listen in
	// lachesis.yaml, on the slurmctld host).
	Controller string
	// MungeSocket is the local munged's socket.
	MungeSocket string
	// Spool is the agent's SQLite file.
	Spool string
	// Socket is the unix socket the lachesis-profiler CLI connects to.
	Socket string
	// Node names this node in reports (default: the hostname).
	Node string
	// AllowRootProfiling lets root request profiles that then run as root.
	// Off by default: a workload is untrusted code and runs as its user.
	AllowRootProfiling bool
	// NodeGPUs is this node's GPU count, which profiles are normalised to
	// (0: as many as the workload uses).
	NodeGPUs int
	// GPUType is the type profiles taken here are recorded with, as the
	// node's typed GRES names it (Gres=gpu:TYPE:N); "" = detect it (the
	// agent's gpuType: NVML's device name matched to the node's GRES).
	GPUType string
	// TelemetryInterval between GPU telemetry reports; 0 turns them off.
	TelemetryInterval time.Duration
	// MaxPointDuration caps a request's point_seconds: one sweep holds the
	// node's only sweep slot, so its length is everyone's wait.
	MaxPointDuration time.Duration
	// MinPointDuration is the shortest point_seconds a request may ask
	// for: it bounds how fast a node turns out profiles (a flood of
	// one-millisecond sweeps would reach the controller's quotas in
	// seconds), and a shorter point measures noise.
	MinPointDuration time.Duration
	// MaxSweepDuration caps a whole sweep (dataset measurement included,
	// queueing not); a sweep running longer is stopped and fails.
	MaxSweepDuration time.Duration
	Delivery         Delivery
	LogLevel         string
	// MetricsListen is the TCP address of the agent's Prometheus /metrics
	// (metrics.listen; "" = off).
	MetricsListen string
	// FakeGPU, when its Dir is set, replaces NVML with the fake GPU device
	// (telemetry.Fake): for the loopback cluster, the demo and CI only.
	FakeGPU FakeGPU
}

// FakeGPU configures the fake GPU device (fake_gpu in the YAML).
type FakeGPU struct {
	// Dir is where processes on fake GPUs write their records ("": off).
	Dir string
	// GPUs is the fake device's GPU count.
	GPUs int
}

// Delivery tunes how the agent sends profiles.
type Delivery struct {
	// RetryMin and RetryMax bound the exponential backoff between attempts.
	RetryMin, RetryMax time.Duration
	// Timeout bounds one attempt: connect, send, and read the ack.
	Timeout time.Duration
	// MaxFrameBytes bounds an ack from the controller.
	MaxFrameBytes int
}

// file mirrors the YAML; its field names are the keys admins write.
type file struct {
	Controller         string  `mapstructure:"controller"`
	MungeSocket        string  `mapstructure:"munge_socket"`
	Spool              string  `mapstructure:"spool"`
	Socket             string  `mapstructure:"socket"`
	Node               string  `mapstructure:"node"`
	AllowRootProfiling bool    `mapstructure:"allow_root_profiling"`
	NodeGPUs           int     `mapstructure:"node_gpus"`
	GPUType            string  `mapstructure:"gpu_type"`
	TelemetryInterval  float64 `mapstructure:"telemetry_interval"`
	MaxPointSeconds    float64 `mapstructure:"max_point_seconds"`
	MinPointSeconds    float64 `mapstructure:"min_point_seconds"`
	MaxSweepSeconds    float64 `mapstructure:"max_sweep_seconds"`
	LogLevel           string  `mapstructure:"log_level"`
	Delivery           struct {
		RetryMin      float64 `mapstructure:"retry_min"`
		RetryMax      float64 `mapstructure:"retry_max"`
		Timeout       float64 `mapstructure:"timeout"`
		MaxFrameBytes int     `mapstructure:"max_frame_bytes"`
	} `mapstructure:"delivery"`
	Metrics struct {
		Listen string `mapstructure:"listen"`
	} `mapstructure:"metrics"`
	FakeGPU struct {
		Dir  string `mapstructure:"dir"`
		GPUs int    `mapstructure:"gpus"`
	} `mapstructure:"fake_gpu"`
}

// Default is the configuration of an empty file, except that Controller has
// no default and must be set.
func Default() Config {
	return Config{
		MungeSocket:       munge.DefaultSocket,
		Spool:             "/var/lib/lachesis/node-agent/spool.db",
		Socket:            "/run/lachesis/agent.sock",
		TelemetryInterval: 30 * time.Second,
		MaxPointDuration:  10 * time.Minute,
		MinPointDuration:  5 * time.Second,
		MaxSweepDuration:  2 * time.Hour,
		Delivery: Delivery{
			RetryMin:      time.Second,
			RetryMax:      time.Minute,
			Timeout:       10 * time.Second,
			MaxFrameBytes: 1 << 20,
		},
		LogLevel: "info",
	}
}

// Parse reads YAML from r, fills in defaults and validates the result.
// hostname supplies the default node name.
func Parse(r io.Reader, hostname func() (string, error)) (Config, error) {
	f := defaultFile()
	if err := yamlconf.Decode(r, &f); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return f.validate(hostname)
}

// defaultFile is Default in the YAML's layout, onto which Parse decodes a
// file so that every key it leaves out keeps its default.
func defaultFile() file {
	d := Default()
	f := file{
		MungeSocket:       d.MungeSocket,
		Spool:             d.Spool,
		Socket:            d.Socket,
		TelemetryInterval: d.TelemetryInterval.Seconds(),
		MaxPointSeconds:   d.MaxPointDuration.Seconds(),
		MinPointSeconds:   d.MinPointDuration.Seconds(),
		MaxSweepSeconds:   d.MaxSweepDuration.Seconds(),
		LogLevel:          d.LogLevel,
	}
	f.Delivery.RetryMin = d.Delivery.RetryMin.Seconds()
	f.Delivery.RetryMax = d.Delivery.RetryMax.Seconds()
	f.Delivery.Timeout = d.Delivery.Timeout.Seconds()
	f.Delivery.MaxFrameBytes = d.Delivery.MaxFrameBytes
	return f
}

// Load parses the file at path; every error names it. A file that sets no
// key (yamlconf.ErrEmpty) or is over yamlconf.MaxBytes
// (yamlconf.ErrTooLarge) is refused like lachesis.yaml is.
func Load(path string) (Config, error) {
	fh, err := yamlconf.Open(path)
	var c Config
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrInvalid, err)
	} else {
		defer fh.Close()
		c, err = Parse(fh, os.Hostname)
	}
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func seconds(key string, v, lo, hi float64) (time.Duration, error) {
	d, err := yamlconf.Seconds(key, v, lo, hi)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return d, nil
}

func (f file) validate(hostname func() (string, error)) (Config, error) {
	c := Config{
		Controller:         strings.TrimSpace(f.Controller),
		MungeSocket:        strings.TrimSpace(f.MungeSocket),
		Spool:              strings.TrimSpace(f.Spool),
		Socket:             strings.TrimSpace(f.Socket),
		Node:               strings.TrimSpace(f.Node),
		AllowRootProfiling: f.AllowRootProfiling,
		NodeGPUs:           f.NodeGPUs,
		GPUType:            strings.ToLower(strings.TrimSpace(f.GPUType)),
		LogLevel:           strings.ToLower(strings.TrimSpace(f.LogLevel)),
		Delivery:           Delivery{MaxFrameBytes: f.Delivery.MaxFrameBytes},
		MetricsListen:      strings.TrimSpace(f.Metrics.Listen),
		FakeGPU:            FakeGPU{Dir: strings.TrimSpace(f.FakeGPU.Dir), GPUs: f.FakeGPU.GPUs},
	}
	if c.Controller == "" {
		return Config{}, fmt.Errorf("%w: controller must be set to the host:port of agent.listen in lachesis.yaml", ErrInvalid)
	}
	if host, port, err := net.SplitHostPort(c.Controller); err != nil || host == "" || port == "" {
		return Config{}, fmt.Errorf("%w: controller must be host:port, got %q", ErrInvalid, f.Controller)
	}
	for key, p := range map[string]string{"munge_socket": c.MungeSocket, "spool": c.Spool, "socket": c.Socket} {
		if !filepath.IsAbs(p) {
			return Config{}, fmt.Errorf("%w: %s must be an absolute path, got %q", ErrInvalid, key, p)
		}
	}
	// sockaddr_un.sun_path holds 107 bytes and a NUL.
	if len(c.Socket) > 107 {
		return Config{}, fmt.Errorf("%w: socket path is %d bytes, at most 107 fit in a unix socket address", ErrInvalid, len(c.Socket))
	}
	if c.Node == "" {
		h, err := hostname()
		if err != nil || h == "" {
			return Config{}, fmt.Errorf("%w: node is not set and the hostname is unknown: %v", ErrInvalid, err)
		}
		c.Node, _, _ = strings.Cut(h, ".")
	}
	if err := metricsrv.ValidateAddr("metrics.listen", c.MetricsListen); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if c.NodeGPUs < 0 {
		return Config{}, fmt.Errorf("%w: node_gpus must be >= 0, got %d", ErrInvalid, c.NodeGPUs)
	}
	if c.FakeGPU.Dir != "" {
		if !filepath.IsAbs(c.FakeGPU.Dir) {
			return Config{}, fmt.Errorf("%w: fake_gpu.dir must be an absolute path, got %q", ErrInvalid, c.FakeGPU.Dir)
		}
		if c.FakeGPU.GPUs < 1 || c.FakeGPU.GPUs > MaxFakeGPUs {
			return Config{}, fmt.Errorf("%w: fake_gpu.gpus must be 1 to %d with fake_gpu.dir set, got %d", ErrInvalid, MaxFakeGPUs, c.FakeGPU.GPUs)
		}
	} else if c.FakeGPU.GPUs != 0 {
		return Config{}, fmt.Errorf("%w: fake_gpu.gpus is set without fake_gpu.dir", ErrInvalid)
	}
	if c.GPUType != "" && !gpuTypePat.MatchString(c.GPUType) {
		return Config{}, fmt.Errorf("%w: gpu_type must be 1 to 64 of a-z, 0-9, '_', '.', '-' (the TYPE of Gres=gpu:TYPE:N), got %q", ErrInvalid, f.GPUType)
	}
	var err error
	if f.TelemetryInterval != 0 {
		if c.TelemetryInterval, err = seconds("telemetry_interval", f.TelemetryInterval, 1, 86400); err != nil {
			return Config{}, err
		}
	}
	if c.MaxPointDuration, err = seconds("max_point_seconds", f.MaxPointSeconds, 1, 86400); err != nil {
		return Config{}, err
	}
	if c.MinPointDuration, err = seconds("min_point_seconds", f.MinPointSeconds, 0.1, 86400); err != nil {
		return Config{}, err
	}
	if c.MinPointDuration > c.MaxPointDuration {
		return Config{}, fmt.Errorf("%w: min_point_seconds (%v) is above max_point_seconds (%v): no request could be served", ErrInvalid, c.MinPointDuration, c.MaxPointDuration)
	}
	if c.MaxSweepDuration, err = seconds("max_sweep_seconds", f.MaxSweepSeconds, 1, 7*86400); err != nil {
		return Config{}, err
	}
	if c.MaxSweepDuration < c.MaxPointDuration {
		return Config{}, fmt.Errorf("%w: max_sweep_seconds (%v) is below max_point_seconds (%v): no sweep could finish a point", ErrInvalid, c.MaxSweepDuration, c.MaxPointDuration)
	}
	if c.Delivery.RetryMin, err = seconds("delivery.retry_min", f.Delivery.RetryMin, 0.01, 3600); err != nil {
		return Config{}, err
	}
	if c.Delivery.RetryMax, err = seconds("delivery.retry_max", f.Delivery.RetryMax, 0.01, 86400); err != nil {
		return Config{}, err
	}
	if c.Delivery.RetryMax < c.Delivery.RetryMin {
		return Config{}, fmt.Errorf("%w: delivery.retry_max (%v) is below delivery.retry_min (%v)", ErrInvalid, c.Delivery.RetryMax, c.Delivery.RetryMin)
	}
	if c.Delivery.Timeout, err = seconds("delivery.timeout", f.Delivery.Timeout, 0.1, 600); err != nil {
		return Config{}, err
	}
	if c.Delivery.MaxFrameBytes < 1024 || c.Delivery.MaxFrameBytes > 64<<20 {
		return Config{}, fmt.Errorf("%w: delivery.max_frame_bytes must be between 1024 and %d, got %d", ErrInvalid, 64<<20, c.Delivery.MaxFrameBytes)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return Config{}, fmt.Errorf("%w: log_level must be debug, info, warn or error, got %q", ErrInvalid, f.LogLevel)
	}
	return c, nil
}
