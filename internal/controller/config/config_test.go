package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/policy/priority"
	"github.com/lachesis-sched/lachesis/policy/sharing"

	"github.com/lachesis-sched/lachesis/internal/util/yamlconf"
)

func TestParseFillsDefaultsForMissingKeys(t *testing.T) {
	c, err := Parse(strings.NewReader("tiresias:\n  mode: gittins\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if c.Tiresias.Mode != "gittins" {
		t.Errorf("mode = %q, want gittins", c.Tiresias.Mode)
	}
	if len(c.Tiresias.Thresholds) != len(d.Tiresias.Thresholds) || c.PassInterval != d.PassInterval || c.DBPath != d.DBPath {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestParseReadsEveryKey(t *testing.T) {
	yaml := `
tiresias:
  mode: las
  queues: 4
  thresholds: [10, 20, 30]
  promote_knob: 2.5
  max_age: 100
  gittins_min_history: 7
  cpu_job_cpus_per_gpu: 12
  sibling_window: 90
  weights: {tiresias: 1000, age: 10, partition: 5, qos: 1}
pass_interval: 2
db_path: /tmp/x.db
log_level: debug
metrics:
  listen: "127.0.0.1:9830"
usage:
  idle_below_pct: 25
  idle_after: 600
`
	c, err := Parse(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Tiresias.Queues(); got != 4 {
		t.Errorf("queues = %d, want 4", got)
	}
	if c.Tiresias.PromoteKnob != 2.5 || c.Tiresias.MaxAge != 100 || c.GittinsMinHistory != 7 || c.CPUJobCPUsPerGPU != 12 ||
		c.Tiresias.SiblingWindow != 90 {
		t.Errorf("tiresias keys not read: %+v", c.Tiresias)
	}
	if w := c.Tiresias.Weights; w.Tiresias != 1000 || w.Age != 10 || w.Partition != 5 || w.QOS != 1 {
		t.Errorf("weights not read: %+v", w)
	}
	if c.PassInterval != 2*time.Second || c.DBPath != "/tmp/x.db" || c.LogLevel != "debug" {
		t.Errorf("top-level keys not read: %+v", c)
	}
	if c.Metrics.Listen != "127.0.0.1:9830" {
		t.Errorf("metrics.listen = %q, want 127.0.0.1:9830", c.Metrics.Listen)
	}
	if c.GPUUse.IdleBelowPct != 25 || c.GPUUse.IdleAfter != 10*time.Minute {
		t.Errorf("usage keys not read: %+v", c.GPUUse)
	}
}

func TestParseReadsFairShare(t *testing.T) {
	yaml := `
fairshare:
  enabled: true
  half_life: 3600
  default_shares: 2
  shares: {physics: 30, Biology: 10}
`
	c, err := Parse(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	f := c.Tiresias.FairShare
	if !f.Enabled || f.HalfLife != 3600 || f.DefaultShares != 2 {
		t.Errorf("fairshare keys not read: %+v", f)
	}
	// Slurm stores account names lower-cased; so does the config.
	if f.Shares["physics"] != 30 || f.Shares["biology"] != 10 || len(f.Shares) != 2 {
		t.Errorf("fairshare.shares = %v, want physics 30 and biology 10", f.Shares)
	}
}

func TestFairShareDefaultsToOnWithAWeekHalfLife(t *testing.T) {
	c, err := Parse(strings.NewReader("log_level: info\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Tiresias.FairShare; !f.Enabled || f.HalfLife != 7*24*3600 || f.DefaultShares != 0 {
		t.Errorf("fairshare defaults = %+v", f)
	}
}

func TestParseReadsThePreemptionRule(t *testing.T) {
	c, err := Parse(strings.NewReader("tiresias:\n  preemption:\n    min_run: 900\n    max_per_job: 4\n    queue_gap: 2\n    promoted_preempts: true\n    spread_victims: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := priority.Preemption{MinRun: 900, MaxPerJob: 4, QueueGap: 2, PromotedPreempts: true}
	if c.Tiresias.Preemption != want {
		t.Fatalf("preemption = %+v, want %+v", c.Tiresias.Preemption, want)
	}
	d, err := Parse(strings.NewReader("log_level: info\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Tiresias.Preemption != priority.DefaultPreemption() {
		t.Fatalf("left-out preemption keys = %+v, want the defaults %+v", d.Tiresias.Preemption, priority.DefaultPreemption())
	}
}

func TestParseThresholds_FixedListOverridesQuantiles(t *testing.T) {
	cases := []struct {
		name, yaml     string
		wantThresholds []float64
		wantQuantiles  []float64
	}{
		{"quantiles alone keep the default fallback list", "tiresias:\n  threshold_quantiles: [0.5, 0.9]\n",
			priority.DefaultConfig().Thresholds, []float64{0.5, 0.9}},
		{"a fixed list alone turns quantiles off", "tiresias:\n  thresholds: [100, 200]\n", []float64{100, 200}, nil},
		{"both set keep both", "tiresias:\n  thresholds: [100]\n  threshold_quantiles: [0.7]\n", []float64{100}, []float64{0.7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(cfg.Tiresias.Thresholds) != fmt.Sprint(c.wantThresholds) ||
				fmt.Sprint(cfg.Tiresias.ThresholdQuantiles) != fmt.Sprint(c.wantQuantiles) {
				t.Fatalf("thresholds %v, quantiles %v; want %v, %v", cfg.Tiresias.Thresholds,
					cfg.Tiresias.ThresholdQuantiles, c.wantThresholds, c.wantQuantiles)
			}
		})
	}
}

func TestParseRejectsBadInputNamingTheKey(t *testing.T) {
	cases := []struct {
		name, yaml, key string
	}{
		{"unknown top-level key is rejected", "pass_intervall: 3\n", "pass_intervall"},
		{"unknown nested key is rejected", "tiresias:\n  thresold: [1]\n", "thresold"},
		{"non-numeric threshold is rejected", "tiresias:\n  thresholds: [10, abc]\n", "thresholds"},
		{"descending thresholds are rejected", "tiresias:\n  thresholds: [20, 10]\n", "thresholds"},
		{"unknown mode is rejected", "tiresias:\n  mode: fifo\n", "mode"},
		{"negative knob is rejected", "tiresias:\n  promote_knob: -1\n", "promote_knob"},
		{"negative sibling window is rejected", "tiresias:\n  sibling_window: -1\n", "sibling_window"},
		{"sibling window over a week is rejected", "tiresias:\n  sibling_window: 604801\n", "sibling_window"},
		{"queues disagreeing with thresholds is rejected", "tiresias:\n  queues: 5\n  thresholds: [1]\n", "queues"},
		{"zero pass interval is rejected", "pass_interval: 0\n", "pass_interval"},
		{"empty db path is rejected", "db_path: \"\"\n", "db_path"},
		{"bad log level is rejected", "log_level: loud\n", "log_level"},
		{"negative weight is rejected", "tiresias:\n  weights: {age: -3}\n", "weights.age"},
		{"broken YAML is rejected", "tiresias: [\n", "YAML"},
		{"tolerance of 1 is rejected", "synergy:\n  tolerance: 1\n", "synergy.tolerance"},
		{"negative fallback is rejected", "synergy:\n  fallback_after: -1\n", "synergy.fallback_after"},
		{"NaN fallback is rejected", "synergy:\n  fallback_after: .nan\n", "synergy.fallback_after"},
		{"pass interval over an hour is rejected", "pass_interval: 3601\n", "pass_interval"},
		{"wrong type for a bool is rejected", "synergy:\n  enabled: maybe\n", "synergy.enabled"},
		{"metrics address without a port is rejected", "metrics:\n  listen: localhost\n", "metrics.listen"},
		{"negative CPU-job rate is rejected", "tiresias:\n  cpu_job_cpus_per_gpu: -1\n", "tiresias.cpu_job_cpus_per_gpu"},
		{"CPU-job rate above the cap is rejected", "tiresias:\n  cpu_job_cpus_per_gpu: 4097\n", "tiresias.cpu_job_cpus_per_gpu"},
		{"a list as the opportunistic partition is rejected", "sharing:\n  opportunistic_partition: gpu,opp\n", "sharing.opportunistic_partition"},
		{"a name with a space as the opportunistic partition is rejected", "sharing:\n  opportunistic_partition: \"op p\"\n", "sharing.opportunistic_partition"},
		{"negative promote_after is rejected", "sharing:\n  promote_after: -1\n", "sharing.promote_after"},
		{"promote_after over a year is rejected", "sharing:\n  promote_after: 31536001\n", "sharing.promote_after"},
		{"negative max_slowdown is rejected", "sharing:\n  max_slowdown: -0.01\n", "sharing.max_slowdown"},
		{"max_slowdown of 1 is rejected", "sharing:\n  max_slowdown: 1\n", "sharing.max_slowdown"},
		{"NaN max_slowdown is rejected", "sharing:\n  max_slowdown: .nan\n", "sharing.max_slowdown"},
		{"a relative pair_table is rejected", "sharing:\n  pair_table: data/gavel\n", "sharing.pair_table"},
		{"an empty pair_table_gpu is rejected", "sharing:\n  pair_table_gpu: \"\"\n", "sharing.pair_table_gpu"},
		{"a pair_quorum of 0 is rejected", "sharing:\n  pair_quorum: 0\n", "sharing.pair_quorum"},
		{"a fractional pair_quorum is rejected", "sharing:\n  pair_quorum: 2.5\n", "sharing.pair_quorum"},
		{"a pair_mark_ttl under a minute is rejected", "sharing:\n  pair_mark_ttl: 59\n", "sharing.pair_mark_ttl"},
		{"a pair_mark_ttl over a year is rejected (a mark must expire)", "sharing:\n  pair_mark_ttl: 31536001\n", "sharing.pair_mark_ttl"},
		{"a NaN pair_mark_ttl is rejected", "sharing:\n  pair_mark_ttl: .nan\n", "sharing.pair_mark_ttl"},
		{"negative convert_below_pct is rejected", "sharing:\n  convert_below_pct: -1\n", "sharing.convert_below_pct"},
		{"convert_below_pct of 100 is rejected", "sharing:\n  convert_below_pct: 100\n", "sharing.convert_below_pct"},
		{"NaN convert_below_pct is rejected", "sharing:\n  convert_below_pct: .nan\n", "sharing.convert_below_pct"},
		{"zero convert_mem_below_mb is rejected", "sharing:\n  convert_mem_below_mb: 0\n", "sharing.convert_mem_below_mb"},
		{"a fractional convert_mem_below_mb is rejected", "sharing:\n  convert_mem_below_mb: 1.5\n", "sharing.convert_mem_below_mb"},
		{"an absurd convert_mem_below_mb is rejected", "sharing:\n  convert_mem_below_mb: 1e30\n", "sharing.convert_mem_below_mb"},
		{"zero convert_min_jobs is rejected", "sharing:\n  convert_min_jobs: 0\n", "sharing.convert_min_jobs"},
		{"convert_min_jobs beyond the history is rejected", "sharing:\n  convert_min_jobs: 9\n", "sharing.convert_min_jobs"},
		{"a fractional convert_min_jobs is rejected", "sharing:\n  convert_min_jobs: 2.5\n", "sharing.convert_min_jobs"},
		{"convert_headroom_pct over 50 is rejected", "sharing:\n  convert_headroom_pct: 51\n", "sharing.convert_headroom_pct"},
		{"negative convert_headroom_pct is rejected", "sharing:\n  convert_headroom_pct: -1\n", "sharing.convert_headroom_pct"},
		{"negative guest_memory_headroom_pct is rejected", "sharing:\n  guest_memory_headroom_pct: -1\n", "sharing.guest_memory_headroom_pct"},
		{"guest_memory_headroom_pct of 90 is rejected", "sharing:\n  guest_memory_headroom_pct: 90\n", "sharing.guest_memory_headroom_pct"},
		{"negative CPU reserve is rejected", "synergy:\n  cpu_reserve_per_node: -1\n", "synergy.cpu_reserve_per_node"},
		{"negative memory reserve is rejected", "synergy:\n  mem_reserve_per_node_mb: -1\n", "synergy.mem_reserve_per_node_mb"},
		{"max frame bytes above the cap is rejected", "agent:\n  max_frame_bytes: 4194305\n", "max_frame_bytes"},
		{"a zero profile cap is rejected", "agent:\n  max_models_per_user: 0\n", "agent.max_models_per_user"},
		{"a negative profile cap is rejected", "agent:\n  max_profiles_per_node: -1\n", "agent.max_profiles_per_node"},
		{"a huge per-node rate is rejected", "agent:\n  profiles_per_node_per_hour: 1000001\n", "agent.profiles_per_node_per_hour"},
		{"fair-share half-life under a minute is rejected", "fairshare:\n  half_life: 5\n", "fairshare.half_life"},
		{"negative default shares are rejected", "fairshare:\n  default_shares: -1\n", "fairshare.default_shares"},
		{"negative account shares are rejected naming the account", "fairshare:\n  shares: {physics: -2}\n", "fairshare.shares.physics"},
		{"non-numeric account shares are rejected", "fairshare:\n  shares: {physics: lots}\n", "fairshare.shares"},
		{"unknown fair-share key is rejected", "fairshare:\n  halflife: 60\n", "halflife"},
		{"bad fair-share values are rejected even while it is off", "fairshare:\n  enabled: false\n  half_life: 1\n", "fairshare.half_life"},
		{"negative min_run is rejected", "tiresias:\n  preemption: {min_run: -1}\n", "tiresias.preemption.min_run"},
		{"queue_gap 0 is rejected", "tiresias:\n  preemption: {queue_gap: 0}\n", "tiresias.preemption.queue_gap"},
		{"quantile of 1 is rejected", "tiresias:\n  threshold_quantiles: [0.5, 1]\n", "tiresias.threshold_quantiles"},
		{"unknown preemption key is rejected", "tiresias:\n  preemption: {min_runs: 5}\n", "min_runs"},
		{"idle threshold over 100% is rejected", "usage:\n  idle_below_pct: 101\n", "usage.idle_below_pct"},
		{"negative idle threshold is rejected", "usage:\n  idle_below_pct: -1\n", "usage.idle_below_pct"},
		{"NaN idle threshold is rejected", "usage:\n  idle_below_pct: .nan\n", "usage.idle_below_pct"},
		{"negative idle time is rejected", "usage:\n  idle_after: -1\n", "usage.idle_after"},
		{"idle time over a week is rejected", "usage:\n  idle_after: 604801\n", "usage.idle_after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.yaml))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %q does not name %q", err, c.key)
			}
		})
	}
}

func TestMaxFrameBytesAtTheCapIsAccepted(t *testing.T) {
	c, err := Parse(strings.NewReader(fmt.Sprintf("agent:\n  max_frame_bytes: %d\n", MaxFrameBytesCap)))
	if err != nil || c.Agent.MaxFrameBytes != MaxFrameBytesCap {
		t.Fatalf("got %d, %v; want the cap accepted", c.Agent.MaxFrameBytes, err)
	}
}

func TestLoadMissingFileGivesDefaults(t *testing.T) {
	c, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.PassInterval != Default().PassInterval {
		t.Errorf("got %+v, want defaults", c)
	}
}

// An emptied or runaway file must not reset a running cluster to the
// defaults: Load refuses it (Core.Reconfigure then keeps the config in
// force), naming the file and the reason.
func TestLoadRefusesEmptyAndOversizedFiles(t *testing.T) {
	huge := "# " + strings.Repeat("x", yamlconf.MaxBytes) + "\npass_interval: 2\n"
	tests := []struct {
		name, text string
		want       error
	}{
		{"empty file is refused", "", yamlconf.ErrEmpty},
		{"blank file is refused", "  \n\n   \n", yamlconf.ErrEmpty},
		{"comments-only file is refused", "# pass_interval: 2\n  # nothing else\n", yamlconf.ErrEmpty},
		{"null document is refused", "---\n~\n", yamlconf.ErrEmpty},
		{"file over 1 MiB is refused", huge, yamlconf.ErrTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "lachesis.yaml")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want %v naming %s", err, tc.want, p)
			}
		})
	}
}

func TestParseRefusesAReaderOverTheBound(t *testing.T) {
	r := io.MultiReader(strings.NewReader("pass_interval: 2\n# "), strings.NewReader(strings.Repeat("x", yamlconf.MaxBytes)))
	if _, err := Parse(r); !errors.Is(err, yamlconf.ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func TestParseAcceptsAFileOfOnlyDefaultsSections(t *testing.T) {
	// A section left without keys names a key, so it is not an empty file;
	// it means the section's defaults.
	c, err := Parse(strings.NewReader("tiresias:\nsynergy:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("got %+v, want the defaults", c)
	}
}

func TestLoadBadFileNamesThePath(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lachesis.yaml")
	if err := os.WriteFile(p, []byte("tiresias:\n  mode: nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want it to name %s", err, p)
	}
}

func TestPathNextToHonoursOverride(t *testing.T) {
	t.Setenv("LACHESIS_CONFIG", "")
	if got := PathNextTo("/etc/slurm/slurm.conf"); got != "/etc/slurm/lachesis.yaml" {
		t.Errorf("got %s", got)
	}
	t.Setenv("LACHESIS_CONFIG", "/opt/l.yaml")
	if got := PathNextTo("/etc/slurm/slurm.conf"); got != "/opt/l.yaml" {
		t.Errorf("got %s", got)
	}
}

func TestStrictOpportunisticReachesTheRankerAndThePreemptionRule(t *testing.T) {
	for _, strict := range []bool{false, true} {
		c, err := Parse(strings.NewReader(fmt.Sprintf("sharing:\n  opportunistic_partition: opp\n  strict_opportunistic: %v\n", strict)))
		if err != nil {
			t.Fatal(err)
		}
		if c.Sharing.Rules.StrictOpportunistic != strict || c.Tiresias.Opportunistic.Rules.StrictOpportunistic != strict ||
			c.Tiresias.Preemption.StrictOpportunistic != strict {
			t.Fatalf("strict_opportunistic %v: sharing %v, ranker %v, preemption %v", strict, c.Sharing.Rules.StrictOpportunistic,
				c.Tiresias.Opportunistic.Rules.StrictOpportunistic, c.Tiresias.Preemption.StrictOpportunistic)
		}
	}
	if Default().Sharing.Rules.StrictOpportunistic {
		t.Fatal("the strict rule is on by default")
	}
}

func TestParseReadsSharing(t *testing.T) {
	c, err := Parse(strings.NewReader("sharing:\n  opportunistic_partition: opp\n  promote_after: 120\n"))
	if err != nil {
		t.Fatal(err)
	}
	rules := Default().Sharing.Rules
	rules.PromoteAfter = 120
	want := priority.Opportunistic{Enabled: true, Rules: rules}
	if c.Sharing.OpportunisticPartition != "opp" || c.Tiresias.Opportunistic != want || c.Sharing.Rules != rules {
		t.Fatalf("sharing %+v, opportunistic %+v", c.Sharing, c.Tiresias.Opportunistic)
	}
	if c.Sharing.Rules.MaxSlowdown != 0.05 {
		t.Fatalf("max_slowdown %v, want the default 0.05", c.Sharing.Rules.MaxSlowdown)
	}
	if c.Sharing.Rules.GuestMemoryHeadroomPct != 10 {
		t.Fatalf("guest_memory_headroom_pct %v, want the default 10", c.Sharing.Rules.GuestMemoryHeadroomPct)
	}
	if c, err := Parse(strings.NewReader("sharing:\n  guest_memory_headroom_pct: 25\n")); err != nil || c.Sharing.Rules.GuestMemoryHeadroomPct != 25 {
		t.Fatalf("guest_memory_headroom_pct 25 read as %v (%v)", c.Sharing.Rules.GuestMemoryHeadroomPct, err)
	}
	if c, err := Parse(strings.NewReader("sharing:\n  max_slowdown: 0.2\n")); err != nil || c.Sharing.Rules.MaxSlowdown != 0.2 {
		t.Fatalf("max_slowdown 0.2 read as %v (%v)", c.Sharing.Rules.MaxSlowdown, err)
	}
	if d := Default(); d.Tiresias.Opportunistic.Enabled || d.Sharing.OpportunisticPartition != "" {
		t.Fatalf("the class must be off by default: %+v %+v", d.Sharing, d.Tiresias.Opportunistic)
	}
	if c.Sharing.PairTable != DefaultPairTable || c.Sharing.PairTableGPU != "v100" {
		t.Fatalf("pair table %q on %q, want the installed copy on v100 by default", c.Sharing.PairTable, c.Sharing.PairTableGPU)
	}
	if c.Sharing.PairQuorum != 3 || c.Sharing.PairMarkTTL != 7*24*3600 {
		t.Fatalf("pair_quorum %d, pair_mark_ttl %d; want 3 and 7 days by default", c.Sharing.PairQuorum, c.Sharing.PairMarkTTL)
	}
	if c, err := Parse(strings.NewReader("sharing:\n  pair_quorum: 2\n  pair_mark_ttl: 3600\n")); err != nil || c.Sharing.PairQuorum != 2 || c.Sharing.PairMarkTTL != 3600 {
		t.Fatalf("pair_quorum 2 and pair_mark_ttl 3600 read as %d, %d (%v)", c.Sharing.PairQuorum, c.Sharing.PairMarkTTL, err)
	}
	c, err = Parse(strings.NewReader("sharing:\n  pair_table: /srv/gavel\n  pair_table_gpu: p100\n"))
	if err != nil || c.Sharing.PairTable != "/srv/gavel" || c.Sharing.PairTableGPU != "p100" {
		t.Fatalf("pair table read as %q on %q (%v)", c.Sharing.PairTable, c.Sharing.PairTableGPU, err)
	}
	if d := Default(); d.Sharing.Rules.Convert.Enabled() {
		t.Fatalf("the shard rewrite must be off by default: %+v", d.Sharing.Rules.Convert)
	}
	c, err = Parse(strings.NewReader("sharing:\n  convert_below_pct: 40\n  convert_mem_below_mb: 8000\n  convert_min_jobs: 5\n  convert_headroom_pct: 0\n"))
	if want := (sharing.ShardConvert{BelowPct: 40, MemBelowMB: 8000, MinJobs: 5}); err != nil || c.Sharing.Rules.Convert != want {
		t.Fatalf("convert keys read as %+v (%v), want %+v", c.Sharing.Rules.Convert, err, want)
	}
}

func TestSharingOpportunisticIsDecidedByThePartitionListAlone(t *testing.T) {
	s := Sharing{OpportunisticPartition: "opp"}
	cases := []struct {
		partitions string
		want       bool
	}{
		{"opp", true},
		{"gpu,opp", true}, // naming a guaranteed partition too does not make a job guaranteed
		{"opp,gpu", true},
		{"gpu", false},
		{"opportunistic", false}, // a name that merely starts the same
		{"xopp", false},
		{"", false},
		// A list as long as the core reads may have lost "opp" off its end.
		{strings.Repeat("g", priority.MaxAccountName-2) + ",o", true},
		{strings.Repeat("g", priority.MaxAccountName), false},
	}
	for _, c := range cases {
		if got := s.Opportunistic(c.partitions); got != c.want {
			t.Errorf("Opportunistic(%q) = %v, want %v", c.partitions, got, c.want)
		}
	}
	if (Sharing{}).Opportunistic("opp") {
		t.Error("no class configured: no job is opportunistic")
	}
}

func TestSharingOpportunisticDoesNotAllocate(t *testing.T) {
	s := Sharing{OpportunisticPartition: "opp"}
	if n := testing.AllocsPerRun(100, func() { s.Opportunistic("gpu,big,opp") }); n != 0 {
		t.Fatalf("Opportunistic allocates %v times per call", n)
	}
}
