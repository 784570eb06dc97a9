package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/metricsrv"
	"github.com/lachesis-sched/lachesis/internal/util/yamlconf"
	"github.com/lachesis-sched/lachesis/policy/placement"
	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/quota"
	"github.com/lachesis-sched/lachesis/policy/sharing"
	"github.com/lachesis-sched/lachesis/policy/synergy"
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
	// CPUJobCPUsPerGPU prices jobs without GPUs: they are charged
	// service at ceil(CPUs / CPUJobCPUsPerGPU) GPU-equivalents, at least 1
	// (priority.ChargedGPUs). 0 takes each job's node's CPUs per GPU, and
	// charges 1 on a node without GPUs.
	CPUJobCPUsPerGPU uint32
	// LogLevel: debug, info, warn or error.
	LogLevel string
	Agent    Agent
	Synergy  synergy.Config
	Metrics  Metrics
	// Placement: GPU-type preference and consolidation at submit.
	Placement placement.Config
	// GPUTypes is each GPU type's default speed relative to a reference
	// GPU of speed 1 (gpu_types.TYPE.speed), for models without a
	// profiled or tabled speed there (priority.Speeds).
	GPUTypes map[string]float64
	// GPUUse: what each job's GPU use, as the node agents measure it, is
	// compared with (lachesis.yaml's usage section; gpushare/gpuuse.go).
	GPUUse GPUUse
	// Sharing: the opportunistic class and GPU sharing (its rules are
	// Sharing.Rules, which Tiresias.Opportunistic carries to the ranker).
	Sharing Sharing
	// Quota: guaranteed GPU quotas in affinity cells (quota.go).
	Quota Quota
}

// GPUUse configures the per-job GPU-use summary (the usage section).
type GPUUse struct {
	// IdleBelowPct: a job whose GPUs' utilisation stays below this
	// percentage (each report's mean over the job's GPUs) ...
	IdleBelowPct float64
	// IdleAfter: ... for at least this long holds its GPUs idle.
	IdleAfter time.Duration
}

// MaxIdleAfter bounds usage.idle_after: a week.
const MaxIdleAfter = 7 * 24 * time.Hour

// Sharing configures how jobs share GPUs: AntMan's opportunistic class.
type Sharing struct {
	// OpportunisticPartition names the Slurm partition whose jobs are
	// opportunistic ("" = no opportunistic class). A job that lists it
	// among its partitions is opportunistic, whatever else it lists.
	OpportunisticPartition string
	// Rules are the sharing rules, one sharing.Config built and validated
	// once here: max_slowdown (the largest share of its solo rate a
	// guaranteed job may lose to an opportunistic job beside it before the
	// opportunistic one is requeued, 0.05 by default), promote_after,
	// guest_memory_headroom_pct (10 by default) and the convert_* keys
	// (the rewrite of a quiet one-GPU job into shards at submit, off by
	// default).
	Rules sharing.Config
	// PairTable is the directory of the pair table's seeds, Gavel's
	// throughputs.csv and colocated.csv (sharing.ReadGavel), read once at
	// start; PairTableGPU is the GPU type whose rows are read. The
	// default is the copy the lachesis-slurmctld package installs. A
	// missing or refused file leaves the table empty and says why in
	// slurmctld's log: introspection then learns every pair by trying it.
	PairTable    string
	PairTableGPU string
	// PairQuorum and PairMarkTTL bound how far what introspection measured
	// reaches (sharing.Limits.Quorum, MarkTTL; issue 34): a pair's
	// measurement applies to the jobs of the two users whose jobs it was
	// measured on, to every user's only once PairQuorum measurements with
	// no user in common agree, and for PairMarkTTL seconds at most.
	PairQuorum  int
	PairMarkTTL int64
}

// MaxPairQuorum and MaxPairMarkTTL bound sharing.pair_quorum and
// sharing.pair_mark_ttl (a year: a mark must expire).
const (
	MaxPairQuorum  = 16
	MaxPairMarkTTL = 365 * 24 * 3600
)

// DefaultPairTable is where the lachesis-slurmctld package installs
// Gavel's measurements (data/gavel in the repository).
const DefaultPairTable = "/usr/share/lachesis/gavel"

// MaxPairTablePath bounds sharing.pair_table.
const MaxPairTablePath = 1024

// Opportunistic reports whether a job whose partition field is partitions
// (Slurm's job_ptr->partition: one name, or a comma-separated list for a
// job submitted to several) is in the opportunistic class. Only the
// partition decides, a field only Slurm's partition access rules let a
// user set, never the job's name or comment; naming another partition
// beside the opportunistic one does not make a job guaranteed.
//
// The core reads at most priority.MaxAccountName bytes of the list: a
// list that long may have lost the opportunistic partition off its end,
// so such a list counts as opportunistic (a user cannot push the name out
// of sight by listing many partitions before it).
func (s Sharing) Opportunistic(partitions string) bool {
	if s.OpportunisticPartition == "" {
		return false
	}
	if len(partitions) >= priority.MaxAccountName && strings.Contains(partitions, ",") {
		return true
	}
	// strings.Cut, not Split: the pass asks this of every job, without
	// allocating.
	for rest := partitions; ; {
		p, after, more := strings.Cut(rest, ",")
		if p == s.OpportunisticPartition {
			return true
		}
		if !more {
			return false
		}
		rest = after
	}
}

// MaxPartitionName bounds sharing.opportunistic_partition; the core reads
// at most 128 bytes of a job's partition list.
const MaxPartitionName = 64

// Speeds is the speed lookup of this config: the per-type defaults,
// placement's per-model table and the given profiled throughputs
// (model → type → throughput, from the profile store). It shares the
// config's maps, which are never modified after loading.
func (c Config) Speeds(profiled map[string]map[string]float64) *priority.Speeds {
	table := make(map[string]map[string]float64, len(c.Placement.Models))
	for name, m := range c.Placement.Models {
		table[name] = m.Speed
	}
	return &priority.Speeds{TypeDefault: c.GPUTypes, Table: table, Profiled: profiled}
}

// Metrics configures the core's Prometheus endpoint.
type Metrics struct {
	// Listen is the TCP address of /metrics ("" = off). Like db_path, a
	// change takes effect when slurmctld restarts.
	Listen string
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
	// Quotas bound what node agents may store, so that a flood of
	// profiles cannot grow slurmctld (the profile cache) without bound.
	Quotas ProfileQuotas
}

// ProfileQuotas caps stored profiles by the user who profiled and the node
// that measured, and rate-limits new profiles per node. A profile past a
// cap is refused for good (the agent is told why and stops retrying it);
// one past the rate is refused for now and retried by its agent.
type ProfileQuotas struct {
	MaxModelsPerUser       int // distinct models a user has profiles of
	MaxProfilesPerUser     int // stored profiles of a user, all models
	MaxModelsPerNode       int
	MaxProfilesPerNode     int
	ProfilesPerNodePerHour int // new profiles a node may store per hour (also the burst)
}

// MaxProfileQuota bounds every agent.* profile quota: more is a typo.
const MaxProfileQuota = 1_000_000

// MaxCPUJobCPUsPerGPU bounds tiresias.cpu_job_cpus_per_gpu: no node has
// more CPUs per GPU than this, so a larger value is a typo.
const MaxCPUJobCPUsPerGPU = 4096

// file mirrors the YAML layout; its field names are the keys admins write.
type file struct {
	Tiresias struct {
		Mode       string    `mapstructure:"mode"`
		Queues     int       `mapstructure:"queues"`
		Thresholds []float64 `mapstructure:"thresholds"`
		// ThresholdQuantiles and Thresholds stay nil unless the file sets
		// them, so validate can tell an admin's fixed list from the
		// defaults.
		ThresholdQuantiles []float64 `mapstructure:"threshold_quantiles"`
		PromoteKnob        float64   `mapstructure:"promote_knob"`
		MaxAge             float64   `mapstructure:"max_age"`
		Weights            struct {
			Tiresias  float64 `mapstructure:"tiresias"`
			Age       float64 `mapstructure:"age"`
			Partition float64 `mapstructure:"partition"`
			QOS       float64 `mapstructure:"qos"`
		} `mapstructure:"weights"`
		GittinsMinHistory int     `mapstructure:"gittins_min_history"`
		CPUJobCPUsPerGPU  int     `mapstructure:"cpu_job_cpus_per_gpu"`
		EffectiveService  bool    `mapstructure:"effective_service"`
		SiblingWindow     float64 `mapstructure:"sibling_window"`
		InheritService    bool    `mapstructure:"inherit_service"`
		Preemption        struct {
			MinRun           float64 `mapstructure:"min_run"`
			MaxPerJob        int     `mapstructure:"max_per_job"`
			QueueGap         int     `mapstructure:"queue_gap"`
			PromotedPreempts bool    `mapstructure:"promoted_preempts"`
			SpreadVictims    bool    `mapstructure:"spread_victims"`
		} `mapstructure:"preemption"`
	} `mapstructure:"tiresias"`
	PassInterval float64 `mapstructure:"pass_interval"`
	DBPath       string  `mapstructure:"db_path"`
	LogLevel     string  `mapstructure:"log_level"`
	Agent        struct {
		Listen        string   `mapstructure:"listen"`
		MaxFrameBytes int      `mapstructure:"max_frame_bytes"`
		AllowedUIDs   []uint32 `mapstructure:"allowed_uids"`
		// Profile quotas (ProfileQuotas).
		MaxModelsPerUser       int `mapstructure:"max_models_per_user"`
		MaxProfilesPerUser     int `mapstructure:"max_profiles_per_user"`
		MaxModelsPerNode       int `mapstructure:"max_models_per_node"`
		MaxProfilesPerNode     int `mapstructure:"max_profiles_per_node"`
		ProfilesPerNodePerHour int `mapstructure:"profiles_per_node_per_hour"`
	} `mapstructure:"agent"`
	Synergy struct {
		Enabled       bool    `mapstructure:"enabled"`
		Tolerance     float64 `mapstructure:"tolerance"`
		Override      bool    `mapstructure:"override"`
		FallbackAfter float64 `mapstructure:"fallback_after"`
		CPUReserve    int     `mapstructure:"cpu_reserve_per_node"`
		MemReserveMB  int64   `mapstructure:"mem_reserve_per_node_mb"`
	} `mapstructure:"synergy"`
	Metrics struct {
		Listen string `mapstructure:"listen"`
	} `mapstructure:"metrics"`
	FairShare struct {
		Enabled       bool               `mapstructure:"enabled"`
		HalfLife      float64            `mapstructure:"half_life"`
		Shares        map[string]float64 `mapstructure:"shares"`
		DefaultShares float64            `mapstructure:"default_shares"`
	} `mapstructure:"fairshare"`
	Placement placementFile `mapstructure:"placement"`
	GPUTypes  map[string]struct {
		Speed float64 `mapstructure:"speed"`
	} `mapstructure:"gpu_types"`
	Usage struct {
		IdleBelowPct float64 `mapstructure:"idle_below_pct"`
		IdleAfter    float64 `mapstructure:"idle_after"`
	} `mapstructure:"usage"`
	Sharing struct {
		OpportunisticPartition string  `mapstructure:"opportunistic_partition"`
		PromoteAfter           float64 `mapstructure:"promote_after"`
		StrictOpportunistic    bool    `mapstructure:"strict_opportunistic"`
		MaxSlowdown            float64 `mapstructure:"max_slowdown"`
		ConvertBelowPct        float64 `mapstructure:"convert_below_pct"`
		ConvertMemBelowMB      float64 `mapstructure:"convert_mem_below_mb"`
		ConvertMinJobs         float64 `mapstructure:"convert_min_jobs"`
		ConvertHeadroomPct     float64 `mapstructure:"convert_headroom_pct"`
		GuestMemoryHeadroomPct float64 `mapstructure:"guest_memory_headroom_pct"`
		PairTable              string  `mapstructure:"pair_table"`
		PairTableGPU           string  `mapstructure:"pair_table_gpu"`
		PairQuorum             float64 `mapstructure:"pair_quorum"`
		PairMarkTTL            float64 `mapstructure:"pair_mark_ttl"`
	} `mapstructure:"sharing"`
	Quota quotaFile `mapstructure:"quota"`
}

// placementFile is the placement section's YAML layout.
type placementFile struct {
	Enabled        bool    `mapstructure:"enabled"`
	FeaturePrefix  string  `mapstructure:"feature_prefix"`
	MinAdvantage   float64 `mapstructure:"min_advantage"`
	SensitiveBelow float64 `mapstructure:"sensitive_below"`
	Models         map[string]struct {
		Speed       map[string]float64 `mapstructure:"speed"`
		SpreadRatio float64            `mapstructure:"spread_ratio"`
	} `mapstructure:"models"`
}

// Default returns the configuration used when lachesis.yaml is absent and
// the value of every key the file leaves out.
func Default() Config {
	tiresias := priority.DefaultConfig()
	tiresias.FairShare = priority.DefaultFairShare()
	tiresias.FairShare.Shares = map[string]float64{}
	// sharing.DefaultPromoteAfter of waiting bounds an opportunistic job's
	// starvation; the class stays off until a partition is named, the
	// shard rewrite until convert_below_pct is set.
	rules := sharing.DefaultConfig()
	tiresias.Opportunistic = priority.Opportunistic{Rules: rules}
	return Config{
		Tiresias:          tiresias,
		PassInterval:      30 * time.Second,
		DBPath:            "/var/lib/slurm/lachesis/lachesis.db",
		GittinsMinHistory: 100,
		LogLevel:          "info",
		Agent: Agent{Listen: "", MaxFrameBytes: 1 << 20, AllowedUIDs: []uint32{},
			// A user profiles a handful of models, each a few times; a node
			// measures a few models an hour (a sweep takes minutes).
			Quotas: ProfileQuotas{MaxModelsPerUser: 100, MaxProfilesPerUser: 1000,
				MaxModelsPerNode: 1000, MaxProfilesPerNode: 10000, ProfilesPerNodePerHour: 120}},
		Synergy:   synergy.DefaultConfig(),
		Placement: placement.DefaultConfig(),
		GPUTypes:  map[string]float64{},
		GPUUse:    GPUUse{IdleBelowPct: 10, IdleAfter: 30 * time.Minute},
		Sharing: Sharing{Rules: rules, PairTable: DefaultPairTable, PairTableGPU: "v100",
			PairQuorum: sharing.DefaultQuorum, PairMarkTTL: sharing.DefaultMarkTTL},
		Quota: Quota{Accounts: map[string]quota.Spec{}, MaxReclaimPerPass: quota.DefaultMaxReclaimPerPass,
			Source: QuotaFromYAML, Refresh: DefaultQuotaRefresh},
	}
}

// Parse reads YAML from r, fills in defaults and validates the result.
func Parse(r io.Reader) (Config, error) {
	f := defaultFile()
	if err := yamlconf.Decode(r, &f); err != nil {
		return Config{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return f.validate()
}

// defaultFile is Default in the YAML's layout, onto which Parse decodes a
// file so that every key it leaves out keeps its default.
func defaultFile() file {
	d := Default()
	var f file
	f.Tiresias.Mode = string(d.Tiresias.Mode)
	f.Tiresias.PromoteKnob = d.Tiresias.PromoteKnob
	f.Tiresias.MaxAge = d.Tiresias.MaxAge
	f.Tiresias.Weights.Tiresias = d.Tiresias.Weights.Tiresias
	f.Tiresias.Weights.Age = d.Tiresias.Weights.Age
	f.Tiresias.Weights.Partition = d.Tiresias.Weights.Partition
	f.Tiresias.Weights.QOS = d.Tiresias.Weights.QOS
	f.Tiresias.GittinsMinHistory = d.GittinsMinHistory
	f.Tiresias.SiblingWindow = d.Tiresias.SiblingWindow
	f.Tiresias.InheritService = d.Tiresias.InheritService
	f.Tiresias.Preemption.MinRun = d.Tiresias.Preemption.MinRun
	f.Tiresias.Preemption.MaxPerJob = d.Tiresias.Preemption.MaxPerJob
	f.Tiresias.Preemption.QueueGap = d.Tiresias.Preemption.QueueGap
	f.Tiresias.Preemption.PromotedPreempts = d.Tiresias.Preemption.PromotedPreempts
	f.Tiresias.Preemption.SpreadVictims = d.Tiresias.Preemption.SpreadVictims
	f.PassInterval = d.PassInterval.Seconds()
	f.DBPath = d.DBPath
	f.LogLevel = d.LogLevel
	f.Agent.Listen = d.Agent.Listen
	f.Agent.MaxFrameBytes = d.Agent.MaxFrameBytes
	f.Agent.AllowedUIDs = d.Agent.AllowedUIDs
	f.Agent.MaxModelsPerUser = d.Agent.Quotas.MaxModelsPerUser
	f.Agent.MaxProfilesPerUser = d.Agent.Quotas.MaxProfilesPerUser
	f.Agent.MaxModelsPerNode = d.Agent.Quotas.MaxModelsPerNode
	f.Agent.MaxProfilesPerNode = d.Agent.Quotas.MaxProfilesPerNode
	f.Agent.ProfilesPerNodePerHour = d.Agent.Quotas.ProfilesPerNodePerHour
	f.Synergy.Enabled = d.Synergy.Enabled
	f.Synergy.Tolerance = d.Synergy.Tolerance
	f.Synergy.Override = d.Synergy.Override
	f.Synergy.FallbackAfter = d.Synergy.FallbackAfter.Seconds()
	f.Synergy.CPUReserve = d.Synergy.CPUReservePerNode
	f.Synergy.MemReserveMB = d.Synergy.MemReservePerNodeMB
	f.Tiresias.CPUJobCPUsPerGPU = int(d.CPUJobCPUsPerGPU)
	f.Placement.Enabled = d.Placement.Enabled
	f.Placement.FeaturePrefix = d.Placement.FeaturePrefix
	f.Placement.MinAdvantage = d.Placement.MinAdvantage
	f.Placement.SensitiveBelow = d.Placement.SensitiveBelow
	f.FairShare.Enabled = d.Tiresias.FairShare.Enabled
	f.FairShare.HalfLife = d.Tiresias.FairShare.HalfLife
	f.FairShare.DefaultShares = d.Tiresias.FairShare.DefaultShares
	f.Usage.IdleBelowPct = d.GPUUse.IdleBelowPct
	f.Usage.IdleAfter = d.GPUUse.IdleAfter.Seconds()
	f.Sharing.OpportunisticPartition = d.Sharing.OpportunisticPartition
	f.Sharing.PromoteAfter = d.Sharing.Rules.PromoteAfter
	f.Sharing.StrictOpportunistic = d.Sharing.Rules.StrictOpportunistic
	f.Sharing.MaxSlowdown = d.Sharing.Rules.MaxSlowdown
	f.Sharing.ConvertBelowPct = d.Sharing.Rules.Convert.BelowPct
	f.Sharing.ConvertMemBelowMB = float64(d.Sharing.Rules.Convert.MemBelowMB)
	f.Sharing.ConvertMinJobs = float64(d.Sharing.Rules.Convert.MinJobs)
	f.Sharing.ConvertHeadroomPct = d.Sharing.Rules.Convert.HeadroomPct
	f.Sharing.GuestMemoryHeadroomPct = d.Sharing.Rules.GuestMemoryHeadroomPct
	f.Sharing.PairTable = d.Sharing.PairTable
	f.Sharing.PairTableGPU = d.Sharing.PairTableGPU
	f.Quota.MaxReclaimPerPass = d.Quota.MaxReclaimPerPass
	f.Quota.Source = d.Quota.Source
	f.Quota.Refresh = d.Quota.Refresh.Seconds()
	f.Sharing.PairQuorum = float64(d.Sharing.PairQuorum)
	f.Sharing.PairMarkTTL = float64(d.Sharing.PairMarkTTL)
	return f
}

// Load reads the file at path. A missing file gives the defaults, so a
// cluster can enable the plugin before writing any YAML; a file that sets
// no key (yamlconf.ErrEmpty) or is over yamlconf.MaxBytes
// (yamlconf.ErrTooLarge) is an error, so that an emptied or runaway file
// on `scontrol reconfigure` keeps the config in force instead of resetting
// it. Every error names path.
func Load(path string) (Config, error) {
	fh, err := yamlconf.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	var c Config
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrInvalid, err)
	} else {
		defer fh.Close()
		c, err = Parse(fh)
	}
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

// validate converts the file into a Config and checks it, one section at
// a time; the first error is returned.
func (f file) validate() (Config, error) {
	t := f.Tiresias
	d := Default().Tiresias
	switch {
	case t.Thresholds == nil && t.ThresholdQuantiles == nil:
		t.Thresholds, t.ThresholdQuantiles = d.Thresholds, d.ThresholdQuantiles
	case t.Thresholds == nil:
		t.Thresholds = d.Thresholds // the fallback until a distribution exists
	case t.ThresholdQuantiles == nil:
		// A fixed list is the admin's override of the learned thresholds.
		t.ThresholdQuantiles = nil
	}
	c := Config{
		Tiresias: priority.Config{
			Mode:               priority.Mode(strings.ToLower(t.Mode)),
			Thresholds:         t.Thresholds,
			ThresholdQuantiles: t.ThresholdQuantiles,
			PromoteKnob:        t.PromoteKnob,
			MaxAge:             t.MaxAge,
			Weights: priority.Weights{
				Tiresias:  t.Weights.Tiresias,
				Age:       t.Weights.Age,
				Partition: t.Weights.Partition,
				QOS:       t.Weights.QOS,
			},
			FairShare: priority.FairShare{
				Enabled:       f.FairShare.Enabled,
				HalfLife:      f.FairShare.HalfLife,
				Shares:        lowerKeys(f.FairShare.Shares),
				DefaultShares: f.FairShare.DefaultShares,
			},
			Preemption: priority.Preemption{
				MinRun:           t.Preemption.MinRun,
				MaxPerJob:        t.Preemption.MaxPerJob,
				QueueGap:         t.Preemption.QueueGap,
				PromotedPreempts: t.Preemption.PromotedPreempts,
				SpreadVictims:    t.Preemption.SpreadVictims,
			},
			EffectiveService: t.EffectiveService,
			SiblingWindow:    t.SiblingWindow,
			InheritService:   t.InheritService,
		},
		DBPath:            f.DBPath,
		GittinsMinHistory: t.GittinsMinHistory,
		LogLevel:          strings.ToLower(f.LogLevel),
		Metrics:           Metrics{Listen: strings.TrimSpace(f.Metrics.Listen)},
		Agent: Agent{
			Listen:        strings.TrimSpace(f.Agent.Listen),
			MaxFrameBytes: f.Agent.MaxFrameBytes,
			AllowedUIDs:   f.Agent.AllowedUIDs,
			Quotas: ProfileQuotas{
				MaxModelsPerUser:       f.Agent.MaxModelsPerUser,
				MaxProfilesPerUser:     f.Agent.MaxProfilesPerUser,
				MaxModelsPerNode:       f.Agent.MaxModelsPerNode,
				MaxProfilesPerNode:     f.Agent.MaxProfilesPerNode,
				ProfilesPerNodePerHour: f.Agent.ProfilesPerNodePerHour,
			},
		},
		Synergy: synergy.Config{
			Enabled:   f.Synergy.Enabled,
			Tolerance: f.Synergy.Tolerance,
			Override:  f.Synergy.Override,

			CPUReservePerNode:   f.Synergy.CPUReserve,
			MemReservePerNodeMB: f.Synergy.MemReserveMB,
		},
	}
	if c.Agent.AllowedUIDs == nil {
		c.Agent.AllowedUIDs = []uint32{}
	}
	// One check per section; each may fill the fields it parses.
	for _, check := range []func(*Config) error{
		f.checkTiresias,
		f.checkFairShare,
		f.checkGeneral,
		f.checkAgent,
		f.checkMetrics,
		f.checkSynergy,
		f.checkPlacement,
		f.checkGPUTypes,
		f.checkUsage,
		f.checkSharing,
		f.checkQuota,
	} {
		if err := check(&c); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// checkTiresias checks the tiresias section and fills what it parses.
func (f file) checkTiresias(c *Config) error {
	t := f.Tiresias
	if err := c.Tiresias.Validate(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, sectionKeys("tiresias", err))
	}
	if t.Queues != 0 && len(c.Tiresias.ThresholdQuantiles) == 0 && t.Queues != len(c.Tiresias.Thresholds)+1 {
		return fmt.Errorf("%w: tiresias.queues is %d but tiresias.thresholds gives %d queues",
			ErrInvalid, t.Queues, len(c.Tiresias.Thresholds)+1)
	}
	if t.CPUJobCPUsPerGPU < 0 || t.CPUJobCPUsPerGPU > MaxCPUJobCPUsPerGPU {
		return fmt.Errorf("%w: tiresias.cpu_job_cpus_per_gpu must be between 0 and %d, got %d",
			ErrInvalid, MaxCPUJobCPUsPerGPU, t.CPUJobCPUsPerGPU)
	}
	c.CPUJobCPUsPerGPU = uint32(t.CPUJobCPUsPerGPU)
	if t.GittinsMinHistory < 0 {
		return fmt.Errorf("%w: tiresias.gittins_min_history must be >= 0, got %d", ErrInvalid, t.GittinsMinHistory)
	}
	return nil
}

// checkFairShare checks the fairshare section. It is validated whether
// enabled or not, so that a typo waits for nobody to switch the feature on
// before it is reported.
func (f file) checkFairShare(c *Config) error {
	if err := c.Tiresias.FairShare.Validate(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, sectionKeys("fairshare", err))
	}
	return nil
}

// checkGeneral checks the top-level keys and fills pass_interval.
func (f file) checkGeneral(c *Config) error {
	var err error
	if c.PassInterval, err = yamlconf.Seconds("pass_interval", f.PassInterval, 1, 3600); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if strings.TrimSpace(f.DBPath) == "" {
		return fmt.Errorf("%w: db_path must not be empty", ErrInvalid)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("%w: log_level must be debug, info, warn or error, got %q", ErrInvalid, f.LogLevel)
	}
	return nil
}

// checkAgent checks the agent section.
func (f file) checkAgent(c *Config) error {
	if c.Agent.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Agent.Listen); err != nil {
			return fmt.Errorf("%w: agent.listen must be host:port (e.g. \":6830\"), got %q", ErrInvalid, f.Agent.Listen)
		}
	}
	if c.Agent.MaxFrameBytes < 1024 || c.Agent.MaxFrameBytes > MaxFrameBytesCap {
		return fmt.Errorf("%w: agent.max_frame_bytes must be between 1024 and %d, got %d", ErrInvalid, MaxFrameBytesCap, f.Agent.MaxFrameBytes)
	}
	for _, q := range []struct {
		key string
		v   int
	}{
		{"max_models_per_user", f.Agent.MaxModelsPerUser},
		{"max_profiles_per_user", f.Agent.MaxProfilesPerUser},
		{"max_models_per_node", f.Agent.MaxModelsPerNode},
		{"max_profiles_per_node", f.Agent.MaxProfilesPerNode},
		{"profiles_per_node_per_hour", f.Agent.ProfilesPerNodePerHour},
	} {
		if q.v < 1 || q.v > MaxProfileQuota {
			return fmt.Errorf("%w: agent.%s must be between 1 and %d, got %d", ErrInvalid, q.key, MaxProfileQuota, q.v)
		}
	}
	return nil
}

// checkMetrics checks the metrics section.
func (f file) checkMetrics(c *Config) error {
	if err := metricsrv.ValidateAddr("metrics.listen", c.Metrics.Listen); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// checkSynergy checks the synergy section and fills fallback_after.
func (f file) checkSynergy(c *Config) error {
	var err error
	// Seconds first: a NaN or huge float has no Duration for Validate to see.
	if c.Synergy.FallbackAfter, err = yamlconf.Seconds("synergy.fallback_after", f.Synergy.FallbackAfter,
		0, synergy.MaxFallbackAfter.Seconds()); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.Synergy.Validate(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, sectionKeys("synergy", err))
	}
	return nil
}

// checkPlacement converts and checks the placement section.
func (f file) checkPlacement(c *Config) error {
	var err error
	c.Placement, err = f.Placement.validate()
	return err
}

// checkSharing converts and checks the sharing section: the opportunistic
// partition is one Slurm partition name (no list, no spaces), and its
// rules are priority.Opportunistic's.
func (f file) checkSharing(c *Config) error {
	name := f.Sharing.OpportunisticPartition
	if len(name) > MaxPartitionName || strings.ContainsAny(name, ", \t\n\r") {
		return fmt.Errorf("%w: sharing.opportunistic_partition must be one partition name of at most %d bytes, without commas or spaces, got %q",
			ErrInvalid, MaxPartitionName, name)
	}
	conv, err := f.shardConvert()
	if err != nil {
		return err
	}
	c.Sharing = Sharing{OpportunisticPartition: name, PairTable: f.Sharing.PairTable, PairTableGPU: f.Sharing.PairTableGPU,
		PairQuorum: int(f.Sharing.PairQuorum), PairMarkTTL: int64(f.Sharing.PairMarkTTL)}
	if q := f.Sharing.PairQuorum; !(q >= 1 && q <= MaxPairQuorum) || q != math.Trunc(q) {
		return fmt.Errorf("%w: sharing.pair_quorum must be a whole number of measurements from 1 to %d, got %v", ErrInvalid, MaxPairQuorum, q)
	}
	if ttl := f.Sharing.PairMarkTTL; !(ttl >= 60 && ttl <= MaxPairMarkTTL) || ttl != math.Trunc(ttl) {
		return fmt.Errorf("%w: sharing.pair_mark_ttl must be a whole number of seconds from 60 to %d, got %v", ErrInvalid, MaxPairMarkTTL, ttl)
	}
	if p := c.Sharing.PairTable; p != "" && (len(p) > MaxPairTablePath || !filepath.IsAbs(p) || strings.ContainsRune(p, 0)) {
		return fmt.Errorf("%w: sharing.pair_table must be an absolute directory path of at most %d bytes (or empty: no seeds), got %q",
			ErrInvalid, MaxPairTablePath, p)
	}
	if g := c.Sharing.PairTableGPU; g == "" || len(g) > 32 || strings.ContainsAny(g, ", \t\n\r") {
		return fmt.Errorf("%w: sharing.pair_table_gpu must be one GPU type of Gavel's table (k80, p100, v100), got %q", ErrInvalid, g)
	}
	// The one sharing.Config: validated by its own rules, except
	// promote_after, whose 0 (never) the ranker allows and checks
	// (priority.Opportunistic.Validate); move_after is the simulator's.
	rules := sharing.DefaultConfig()
	rules.MaxSlowdown = f.Sharing.MaxSlowdown
	rules.GuestMemoryHeadroomPct = f.Sharing.GuestMemoryHeadroomPct
	rules.Convert = conv
	if err := rules.Validate(); err != nil {
		return fmt.Errorf("%w: sharing.%s", ErrInvalid, strings.TrimPrefix(err.Error(), sharing.ErrBadConfig.Error()+": "))
	}
	rules.PromoteAfter = f.Sharing.PromoteAfter
	rules.StrictOpportunistic = f.Sharing.StrictOpportunistic
	c.Sharing.Rules = rules
	// The preemption rule reads the class's rule from its own copy.
	c.Tiresias.Preemption.StrictOpportunistic = rules.StrictOpportunistic
	c.Tiresias.Opportunistic = priority.Opportunistic{Enabled: name != "", Rules: rules}
	if err := c.Tiresias.Opportunistic.Validate(); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, sectionKeys("sharing", err))
	}
	return nil
}

// shardConvert checks the sharing.convert_* keys (whole numbers where a
// count is meant; NaN fails every range check).
func (f file) shardConvert() (sharing.ShardConvert, error) {
	s := f.Sharing
	switch {
	case !(s.ConvertBelowPct >= 0 && s.ConvertBelowPct < 100):
		return sharing.ShardConvert{}, fmt.Errorf("%w: sharing.convert_below_pct must be at least 0 (0: off) and below 100, got %v", ErrInvalid, s.ConvertBelowPct)
	case !(s.ConvertMemBelowMB >= 1 && s.ConvertMemBelowMB <= 1<<24) || s.ConvertMemBelowMB != math.Trunc(s.ConvertMemBelowMB):
		return sharing.ShardConvert{}, fmt.Errorf("%w: sharing.convert_mem_below_mb must be a whole number of MB from 1 to %d, got %v", ErrInvalid, 1<<24, s.ConvertMemBelowMB)
	case !(s.ConvertMinJobs >= 1 && s.ConvertMinJobs <= sharing.MaxConvertMinJobs) || s.ConvertMinJobs != math.Trunc(s.ConvertMinJobs):
		return sharing.ShardConvert{}, fmt.Errorf("%w: sharing.convert_min_jobs must be a whole number from 1 to %d, got %v", ErrInvalid, sharing.MaxConvertMinJobs, s.ConvertMinJobs)
	case !(s.ConvertHeadroomPct >= 0 && s.ConvertHeadroomPct <= sharing.MaxConvertHeadroomPct):
		return sharing.ShardConvert{}, fmt.Errorf("%w: sharing.convert_headroom_pct must be between 0 and %d, got %v", ErrInvalid, sharing.MaxConvertHeadroomPct, s.ConvertHeadroomPct)
	}
	return sharing.ShardConvert{BelowPct: s.ConvertBelowPct, MemBelowMB: uint64(s.ConvertMemBelowMB),
		MinJobs: int(s.ConvertMinJobs), HeadroomPct: s.ConvertHeadroomPct}, nil
}

// checkGPUTypes converts and checks gpu_types.
func (f file) checkGPUTypes(c *Config) error {
	var err error
	c.GPUTypes, err = f.gpuTypes()
	return err
}

// checkUsage checks the usage section and fills it.
func (f file) checkUsage(c *Config) error {
	u := f.Usage
	if !(u.IdleBelowPct >= 0 && u.IdleBelowPct <= 100) { // NaN too
		return fmt.Errorf("%w: usage.idle_below_pct must be between 0 and 100, got %v", ErrInvalid, u.IdleBelowPct)
	}
	after, err := yamlconf.Seconds("usage.idle_after", u.IdleAfter, 0, MaxIdleAfter.Seconds())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	c.GPUUse = GPUUse{IdleBelowPct: u.IdleBelowPct, IdleAfter: after}
	return nil
}

// lowerKeys lower-cases account names, as Slurm does with every job's
// account (job_mgr.c), so that "Physics" in the file matches the jobs of
// account "physics". Two spellings of one account: the last one read wins.
func lowerKeys(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}

// sectionKeys prefixes each of a section's Validate errors, which name keys
// relative to the section, with the section, so that every message names
// the full YAML key (e.g. "tiresias.thresholds: ...").
func sectionKeys(section string, err error) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, section+"."+e.Error())
	}
	return strings.Join(msgs, "; ")
}

// validate converts the placement section and checks it; every message
// names the full key (e.g. "placement.models.bert.speed.v100: ...").
func (p placementFile) validate() (placement.Config, error) {
	c := placement.Config{
		Enabled:        p.Enabled,
		FeaturePrefix:  strings.TrimSpace(p.FeaturePrefix),
		MinAdvantage:   p.MinAdvantage,
		SensitiveBelow: p.SensitiveBelow,
		Models:         make(map[string]placement.Model, len(p.Models)),
	}
	for name, m := range p.Models {
		c.Models[name] = placement.Model{Speed: m.Speed, SpreadRatio: m.SpreadRatio}
	}
	c = c.Normalize()
	if err := c.Validate(); err != nil {
		return placement.Config{}, fmt.Errorf("%w: %s", ErrInvalid, sectionKeys("placement", err))
	}
	return c, nil
}

// gpuTypes converts gpu_types (type names lower case, as Slurm's GRES
// types are matched) and checks it; messages name the full key, e.g.
// "gpu_types.a100.speed".
func (f file) gpuTypes() (map[string]float64, error) {
	out := make(map[string]float64, len(f.GPUTypes))
	for name, t := range f.GPUTypes {
		out[strings.ToLower(strings.TrimSpace(name))] = t.Speed
	}
	if err := priority.ValidateTypeSpeeds(out); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, sectionKeys("gpu_types", err))
	}
	return out, nil
}
