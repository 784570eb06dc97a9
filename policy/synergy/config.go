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
	// FallbackAfter is how long a job may be held back by its enlarged
	// request (some node has its GPUs free, none its request) before
	// start-time sizing lowers it to what a node spares (Fallback). The
	// clock starts when the job is first held back, not at submission: a
	// job that queued for hours behind others still waits this long for a
	// node that holds its best case. Slurm never resizes a running job, so
	// a job lowered at once runs slower for its whole run, while waiting
	// costs a GPU some minutes (Waits).
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
	return Config{Enabled: true, Tolerance: 0.02, Override: false, FallbackAfter: DefaultFallbackAfter}
}

// DefaultFallbackAfter is how long a job held back by its sizing waits for
// its request by default (Config.Waits). On Synergy's job lists
// (docs/evaluation, section 1b) waiting half an hour instead of lowering
// at once raises the average speed near capacity (9 and 12 jobs/h) from
// 1.26 to 1.31, all of it from CPU-hungry jobs that no longer start
// lowered on a node crowded by others; the GPU a job leaves idle while it
// waits costs far less than running for hours below its best case. Below
// capacity nothing changes: a node with room is free at once.
const DefaultFallbackAfter = 30 * time.Minute

// Waits is start-time sizing's patience, the one rule that the pass
// (Fallback) and the simulator (sim's AllocStart) apply: whether a job
// sized sz with g GPUs per node, held back for held by its request (some
// node has its GPUs free, none its request), keeps waiting for a node that
// holds its request rather than being lowered now to what a node spares
// (FitNow). Slurm never resizes a running job, so a job lowered now runs
// below its request for its whole run, while waiting costs a free GPU some
// minutes. It waits up to c.FallbackAfter, and only for a request that node
// n (as Slurm configures it, empty) holds while leaving a CPU for each of
// its other GPUs: a larger request would strand those GPUs even once it
// starts, needs a node most of whose jobs have ended, and under FIFO holds
// back every job queued behind it meanwhile, so it is lowered at once.
func (c Config) Waits(sz Sizing, g int, n NodeState, held time.Duration) bool {
	return held < c.FallbackAfter && n.Usable && g > 0 && n.GPUs >= g &&
		g*sz.CPUs+(n.GPUs-g) <= n.CPUs && uint64(g)*sz.MemMB <= n.MemMB
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
