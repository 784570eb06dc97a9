package synergy

import (
	"errors"
	"time"

	"github.com/lachesis-sched/lachesis/internal/util/configerr"
)

// MaxFallbackAfter bounds Config.FallbackAfter: a job kept waiting a week
// for an enlarged request has waited far past any use of the fallback.
const MaxFallbackAfter = 7 * 24 * time.Hour

// Config configures CPU/memory right-sizing by job_submit/synergy: the
// synergy section of lachesis.yaml, which internal/controller/config reads
// and composes, as it does priority.Config for the tiresias section.
type Config struct {
	Enabled bool
	// Tolerance: the best-case demand is the smallest (CPUs, memory) within
	// this fraction of the model's best throughput.
	Tolerance float64
	// Override: profile-based sizing replaces explicit --cpus-per-gpu,
	// --mem-per-gpu and --mem requests instead of deferring to them.
	Override bool
	// FallbackAfter is how long a job may pend only because its enlarged
	// request fits nowhere, while its GPUs are free, before start-time
	// sizing lowers it to what a node spares (Fallback).
	FallbackAfter time.Duration
	// CPUReservePerNode and MemReservePerNodeMB are left on every node for
	// jobs without GPUs: Synergy sizes GPU jobs out of the rest (the
	// proportional share and whether a best case fits are computed on
	// CPUs − reserve and memory − reserve). Without a reserve, GPU jobs
	// at the proportional share on every GPU of a node take all of its
	// CPUs and memory, and a CPU-only job there can never start while GPU
	// work keeps coming. 0 (the default) keeps no reserve: on a node whose
	// CPUs are a multiple of its GPUs even 1 reserved CPU costs every GPU
	// job one CPU per GPU (the share is whole CPUs), which clusters that
	// run CPU-only jobs elsewhere should not pay.
	CPUReservePerNode   int
	MemReservePerNodeMB int64
}

// Bounds on the reserves: larger values are typos, not nodes.
const (
	MaxCPUReservePerNode   = 4096
	MaxMemReservePerNodeMB = 64 << 20 // 64 TiB
)

// DefaultConfig is the single place Synergy's defaults live
// (etc/lachesis.yaml documents them).
func DefaultConfig() Config {
	return Config{Enabled: true, Tolerance: 0.02, Override: false, FallbackAfter: 60 * time.Second}
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("invalid synergy config")

// Validate reports every problem in c at once; each error is a
// *configerr.KeyError wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if !(c.Tolerance >= 0 && c.Tolerance < 1) {
		errs = append(errs, configerr.New(ErrInvalidConfig, "tolerance", "must be in [0, 1), got %v", c.Tolerance))
	}
	if c.FallbackAfter < 0 || c.FallbackAfter > MaxFallbackAfter {
		errs = append(errs, configerr.New(ErrInvalidConfig, "fallback_after", "must be between 0 and %v seconds, got %v",
			MaxFallbackAfter.Seconds(), c.FallbackAfter.Seconds()))
	}
	if c.CPUReservePerNode < 0 || c.CPUReservePerNode > MaxCPUReservePerNode {
		errs = append(errs, configerr.New(ErrInvalidConfig, "cpu_reserve_per_node", "must be between 0 and %d CPUs, got %d",
			MaxCPUReservePerNode, c.CPUReservePerNode))
	}
	if c.MemReservePerNodeMB < 0 || c.MemReservePerNodeMB > MaxMemReservePerNodeMB {
		errs = append(errs, configerr.New(ErrInvalidConfig, "mem_reserve_per_node_mb", "must be between 0 and %d MB, got %d",
			MaxMemReservePerNodeMB, c.MemReservePerNodeMB))
	}
	return errors.Join(errs...)
}
