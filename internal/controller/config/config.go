package config

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/lachesis-sched/lachesis/priority"
)

// ErrInvalid is wrapped by every validation or parse error.
var ErrInvalid = errors.New("invalid lachesis config")

// FileName is the config's name next to slurm.conf.
const FileName = "lachesis.yaml"

// Config is the whole, validated configuration.
type Config struct {
	Tiresias priority.Config
	// PassInterval is how often the priority plugin re-ranks all jobs.
	PassInterval time.Duration
	// DBPath is the SQLite ledger (WAL mode).
	DBPath string
	// GittinsMinHistory is how many completed jobs the cluster's own
	// history needs before it replaces the bundled seed distribution.
	GittinsMinHistory int
	// LogLevel: debug, info, warn or error.
	LogLevel string
	Agent    Agent
	Synergy  Synergy
}

// Agent configures the controller's listener for node agents.
// MaxFrameBytesCap is the largest agent.max_frame_bytes: wire.MaxBodyBytes,
// the most any build reads. Reports are a few KB; a larger limit only
// lets an authenticated peer make slurmctld hold more memory.
const MaxFrameBytesCap = 4 << 20

type Agent struct {
	// Listen is the TCP address node agents report to ("" = no listener).
	Listen string
	// MaxFrameBytes bounds one frame; larger frames are rejected unread.
	// At most MaxFrameBytesCap.
	MaxFrameBytes int
	// AllowedUIDs may report besides root and SlurmUser.
	AllowedUIDs []uint32
}

// Synergy configures CPU/memory right-sizing by job_submit/synergy.
type Synergy struct {
	Enabled bool
	// Tolerance: the best-case demand is the smallest (CPUs, memory) within
	// this fraction of the model's best throughput.
	Tolerance float64
	// Override: profile-based sizing replaces explicit --cpus-per-gpu,
	// --mem-per-gpu and --mem requests instead of deferring to them.
	Override bool
	// FallbackAfter is how long a job may pend only because its enlarged
	// request fits nowhere, while its GPUs are free, before it is shrunk
	// toward the GPU-proportional share.
	FallbackAfter time.Duration
}

// file mirrors the YAML layout; its field names are the keys admins write.
type file struct {
	Tiresias struct {
		Mode        string    `mapstructure:"mode"`
		Queues      int       `mapstructure:"queues"`
		Thresholds  []float64 `mapstructure:"thresholds"`
		PromoteKnob float64   `mapstructure:"promote_knob"`
		MaxAge      float64   `mapstructure:"max_age"`
		Weights     struct {
			Tiresias  float64 `mapstructure:"tiresias"`
			Age       float64 `mapstructure:"age"`
			Partition float64 `mapstructure:"partition"`
			QOS       float64 `mapstructure:"qos"`
		} `mapstructure:"weights"`
		GittinsMinHistory int `mapstructure:"gittins_min_history"`
	} `mapstructure:"tiresias"`
	PassInterval float64 `mapstructure:"pass_interval"`
	DBPath       string  `mapstructure:"db_path"`
	LogLevel     string  `mapstructure:"log_level"`
	Agent        struct {
		Listen        string   `mapstructure:"listen"`
		MaxFrameBytes int      `mapstructure:"max_frame_bytes"`
		AllowedUIDs   []uint32 `mapstructure:"allowed_uids"`
	} `mapstructure:"agent"`
	Synergy struct {
		Enabled       bool    `mapstructure:"enabled"`
		Tolerance     float64 `mapstructure:"tolerance"`
		Override      bool    `mapstructure:"override"`
		FallbackAfter float64 `mapstructure:"fallback_after"`
	} `mapstructure:"synergy"`
}

// Default returns the configuration used when lachesis.yaml is absent and
// the value of every key the file leaves out.
func Default() Config {
	return Config{
		Tiresias:          priority.DefaultConfig(),
		PassInterval:      30 * time.Second,
		DBPath:            "/var/lib/slurm/lachesis/lachesis.db",
		GittinsMinHistory: 100,
		LogLevel:          "info",
		Agent:             Agent{Listen: "", MaxFrameBytes: 1 << 20, AllowedUIDs: []uint32{}},
		Synergy:           Synergy{Enabled: true, Tolerance: 0.02, Override: false, FallbackAfter: 60 * time.Second},
	}
}

func defaults(v *viper.Viper) {
	d := Default()
	v.SetDefault("tiresias.mode", string(d.Tiresias.Mode))
	v.SetDefault("tiresias.thresholds", d.Tiresias.Thresholds)
	v.SetDefault("tiresias.promote_knob", d.Tiresias.PromoteKnob)
	v.SetDefault("tiresias.max_age", d.Tiresias.MaxAge)
	v.SetDefault("tiresias.weights.tiresias", d.Tiresias.Weights.Tiresias)
	v.SetDefault("tiresias.weights.age", d.Tiresias.Weights.Age)
	v.SetDefault("tiresias.weights.partition", d.Tiresias.Weights.Partition)
	v.SetDefault("tiresias.weights.qos", d.Tiresias.Weights.QOS)
	v.SetDefault("tiresias.gittins_min_history", d.GittinsMinHistory)
	v.SetDefault("pass_interval", d.PassInterval.Seconds())
	v.SetDefault("db_path", d.DBPath)
	v.SetDefault("log_level", d.LogLevel)
	v.SetDefault("agent.listen", d.Agent.Listen)
	v.SetDefault("agent.max_frame_bytes", d.Agent.MaxFrameBytes)
	v.SetDefault("agent.allowed_uids", d.Agent.AllowedUIDs)
	v.SetDefault("synergy.enabled", d.Synergy.Enabled)
	v.SetDefault("synergy.tolerance", d.Synergy.Tolerance)
	v.SetDefault("synergy.override", d.Synergy.Override)
	v.SetDefault("synergy.fallback_after", d.Synergy.FallbackAfter.Seconds())
}

// Parse reads YAML from r, fills in defaults and validates the result.
func Parse(r io.Reader) (Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	defaults(v)
	if err := v.ReadConfig(r); err != nil {
		return Config{}, fmt.Errorf("%w: not valid YAML: %v", ErrInvalid, err)
	}
	var f file
	err := v.Unmarshal(&f, func(dc *mapstructure.DecoderConfig) {
		dc.ErrorUnused = true // a misspelt key is an error, not a silent default
	})
	if err != nil {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalid, describeDecodeError(err))
	}
	return f.validate()
}

// Load reads the file at path. A missing file gives the defaults, so a
// cluster can enable the plugin before writing any YAML.
func Load(path string) (Config, error) {
	fh, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		c := Default()
		return c, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	defer fh.Close()
	c, err := Parse(fh)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// PathNextTo returns the config path for a slurm.conf path, honouring the
// LACHESIS_CONFIG environment variable as an override.
func PathNextTo(slurmConf string) string {
	if p := os.Getenv("LACHESIS_CONFIG"); p != "" {
		return p
	}
	return filepath.Join(filepath.Dir(slurmConf), FileName)
}

func (f file) validate() (Config, error) {
	t := f.Tiresias
	c := Config{
		Tiresias: priority.Config{
			Mode:        priority.Mode(strings.ToLower(t.Mode)),
			Thresholds:  t.Thresholds,
			PromoteKnob: t.PromoteKnob,
			MaxAge:      t.MaxAge,
			Weights: priority.Weights{
				Tiresias:  t.Weights.Tiresias,
				Age:       t.Weights.Age,
				Partition: t.Weights.Partition,
				QOS:       t.Weights.QOS,
			},
		},
		PassInterval:      time.Duration(f.PassInterval * float64(time.Second)),
		DBPath:            f.DBPath,
		GittinsMinHistory: t.GittinsMinHistory,
		LogLevel:          strings.ToLower(f.LogLevel),
		Agent: Agent{
			Listen:        strings.TrimSpace(f.Agent.Listen),
			MaxFrameBytes: f.Agent.MaxFrameBytes,
			AllowedUIDs:   f.Agent.AllowedUIDs,
		},
		Synergy: Synergy{
			Enabled:       f.Synergy.Enabled,
			Tolerance:     f.Synergy.Tolerance,
			Override:      f.Synergy.Override,
			FallbackAfter: time.Duration(f.Synergy.FallbackAfter * float64(time.Second)),
		},
	}
	if c.Agent.AllowedUIDs == nil {
		c.Agent.AllowedUIDs = []uint32{}
	}
	if err := c.Tiresias.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w: %s", ErrInvalid, tiresiasKeys(err))
	}
	if t.Queues != 0 && t.Queues != len(t.Thresholds)+1 {
		return Config{}, fmt.Errorf("%w: tiresias.queues is %d but tiresias.thresholds gives %d queues",
			ErrInvalid, t.Queues, len(t.Thresholds)+1)
	}
	if t.GittinsMinHistory < 0 {
		return Config{}, fmt.Errorf("%w: tiresias.gittins_min_history must be >= 0, got %d", ErrInvalid, t.GittinsMinHistory)
	}
	if math.IsNaN(f.PassInterval) || f.PassInterval < 1 || f.PassInterval > 3600 {
		return Config{}, fmt.Errorf("%w: pass_interval must be between 1 and 3600 seconds, got %v", ErrInvalid, f.PassInterval)
	}
	if strings.TrimSpace(f.DBPath) == "" {
		return Config{}, fmt.Errorf("%w: db_path must not be empty", ErrInvalid)
	}
	if c.Agent.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Agent.Listen); err != nil {
			return Config{}, fmt.Errorf("%w: agent.listen must be host:port (e.g. \":6830\"), got %q", ErrInvalid, f.Agent.Listen)
		}
	}
	if c.Agent.MaxFrameBytes < 1024 || c.Agent.MaxFrameBytes > MaxFrameBytesCap {
		return Config{}, fmt.Errorf("%w: agent.max_frame_bytes must be between 1024 and %d, got %d", ErrInvalid, MaxFrameBytesCap, f.Agent.MaxFrameBytes)
	}
	if !(c.Synergy.Tolerance >= 0 && c.Synergy.Tolerance < 1) {
		return Config{}, fmt.Errorf("%w: synergy.tolerance must be in [0, 1), got %v", ErrInvalid, f.Synergy.Tolerance)
	}
	if !(f.Synergy.FallbackAfter >= 0) || f.Synergy.FallbackAfter > 7*24*3600 {
		return Config{}, fmt.Errorf("%w: synergy.fallback_after must be between 0 and 604800 seconds, got %v", ErrInvalid, f.Synergy.FallbackAfter)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return Config{}, fmt.Errorf("%w: log_level must be debug, info, warn or error, got %q", ErrInvalid, f.LogLevel)
	}
	return c, nil
}

// tiresiasKeys lists the policy's key errors with their full YAML keys.
func tiresiasKeys(err error) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		var ke *priority.KeyError
		if errors.As(e, &ke) {
			msgs = append(msgs, "tiresias."+ke.Error())
		} else {
			msgs = append(msgs, e.Error())
		}
	}
	return strings.Join(msgs, "; ")
}

// describeDecodeError turns mapstructure's messages into ones that name the
// full YAML key, e.g. "tiresias.thresholds[1]: cannot parse 'abc' as float".
func describeDecodeError(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "decoding failed due to the following error(s):\n\n", "")
	msg = strings.ReplaceAll(msg, "'' has invalid keys: ", "unknown key(s): ")
	return strings.TrimSpace(msg)
}
