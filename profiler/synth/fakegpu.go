package synth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
	"github.com/lachesis-sched/lachesis/policy/sharing"
)

// FakeGPU puts the job "on" fake GPUs (the node agent's fake device,
// internal/protocol/fakegpu): while it runs it keeps a record of its pid,
// GPUs, the utilisation its GPU step drives (the fraction of time the step
// is busy) and the memory it holds in Dir, and it slows down while another
// process has a record on one of its GPUs.
type FakeGPU struct {
	// Dir is the fake device's directory ("": no fake GPU).
	Dir string
	// GPUs are the node-wide indexes of the job's GPUs (ParseVisibleDevices
	// of CUDA_VISIBLE_DEVICES).
	GPUs []int
	// MemMB is the GPU memory the job claims to hold.
	MemMB float64
	// MemFile, when set and while the file exists, replaces MemMB with
	// the number it holds (MiB), re-read at every refresh: a job whose
	// memory grows while it runs (a test or demo changes it).
	MemFile string
	// SharedSpeed, when above 0, is the job's speed relative to alone
	// while it shares a GPU, whoever the neighbour (1: no slowdown); it
	// overrides Pairs.
	SharedSpeed float64
	// Model is the job's model key, written in its record so neighbours
	// can look the pair up; Pairs is the pair table (Gavel's seeds,
	// sharing.ReadGavel) the job's speed beside its neighbours' models
	// comes from when SharedSpeed is 0.
	Model string
	Pairs *sharing.Table
}

// minSharedSpeed is the speed beside a neighbour the pair table says the
// model did not run with at all (fraction 0: Gavel's out-of-memory pairs):
// slow, but the job still moves.
const minSharedSpeed = 0.05

// ErrNoFakeGPU: FakeGPU.Dir is set but the job was given no GPU.
var ErrNoFakeGPU = errors.New("synth: a fake GPU directory but no GPU (CUDA_VISIBLE_DEVICES unset or empty)")

// ParseVisibleDevices reads CUDA_VISIBLE_DEVICES as Slurm sets it for gpu
// and shard allocations: comma-separated GPU indexes. Without device
// constraint (the loopback cluster) they are the node's own indexes.
func ParseVisibleDevices(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("%w: CUDA_VISIBLE_DEVICES %q is not a list of GPU indexes", ErrBadConfig, s)
		}
		if !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out, nil
}

// sharedSpeed is the job's speed while it shares its GPU with
// neighbours (their records' models): -shared-speed when given, else the
// pair table's fraction of the job's model beside each neighbour's, the
// slowest of them; a pair the table lacks (or a neighbour without a
// model) does not slow it.
func sharedSpeed(g FakeGPU, neighbours []string) float64 {
	if len(neighbours) == 0 {
		return 1
	}
	if g.SharedSpeed > 0 {
		return min(g.SharedSpeed, 1)
	}
	speed := 1.0
	if g.Pairs == nil || g.Model == "" {
		return speed
	}
	for _, m := range neighbours {
		if s, _, ok := g.Pairs.Lookup(g.Model, m); ok && m != "" {
			speed = min(speed, max(s.Of, minSharedSpeed))
		}
	}
	return speed
}

// neighbours is the models of the other live processes with a fresh
// record on one of the job's GPUs ("" for one without), bounded like the
// agent's read of the directory.
func neighbours(g FakeGPU, self int, now time.Time) []string {
	names, _, err := fakegpu.List(g.Dir)
	if err != nil {
		return nil
	}
	var n []string
	for _, name := range names {
		r, err := fakegpu.Read(filepath.Join(g.Dir, name))
		if err != nil || r.PID == self || now.Sub(r.ModTime) > fakegpu.Stale {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(r.PID)); err != nil {
			continue
		}
		if slices.ContainsFunc(r.GPUs, func(i int) bool { return slices.Contains(g.GPUs, i) }) {
			n = append(n, r.Model)
		}
	}
	return n
}

// onFakeGPU keeps the job's record fresh every fakegpu.Refresh and sets
// clock's speed from its neighbours, until ctx ends; then it removes the
// record. Its utilisation is clock's busy time over the wall time since
// the last refresh.
func onFakeGPU(ctx context.Context, g FakeGPU, clock gpuClock, log func(string, ...any)) {
	pid := os.Getpid()
	path := filepath.Join(g.Dir, fakegpu.FileName(pid))
	defer os.Remove(path)
	tick := time.NewTicker(fakegpu.Refresh)
	defer tick.Stop()
	lastAt := time.Now()
	lastBusy := clock.busyAt(lastAt)
	util, shared := 0.0, -1
	lastMemErr := fmt.Sprint(nil)
	for {
		now := time.Now()
		if d := now.Sub(lastAt); d > 0 {
			b := clock.busyAt(now)
			util = min(100, 100*float64(b-lastBusy)/float64(d))
			lastBusy, lastAt = b, now
		}
		n := neighbours(g, pid, now)
		clock.setSpeed(now, sharedSpeed(g, n))
		if (len(n) > 0) != (shared > 0) {
			log("lachesis-synth: %d other process(es) on my fake GPUs %v: speed %.2f\n", len(n), g.GPUs, sharedSpeed(g, n))
		}
		shared = len(n)
		mem, err := memNow(g)
		if msg := fmt.Sprint(err); msg != lastMemErr { // logged once per change
			if err != nil {
				log("lachesis-synth: %v; holding %v MiB\n", err, mem)
			}
			lastMemErr = msg
		}
		if err := fakegpu.Write(g.Dir, fakegpu.Record{PID: pid, GPUs: g.GPUs, UtilPct: util, MemMB: mem, Model: g.Model}); err != nil {
			log("lachesis-synth: fake GPU record: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maxMemFile bounds what memNow reads of FakeGPU.MemFile.
const maxMemFile = 64

// memNow is the memory the job holds now: MemFile's number while the file
// exists and holds one in 0..fakegpu.MemTotalMB, else MemMB (with the
// reason when the file is there but unusable).
func memNow(g FakeGPU) (float64, error) {
	if g.MemFile == "" {
		return g.MemMB, nil
	}
	f, err := os.Open(g.MemFile)
	if errors.Is(err, fs.ErrNotExist) {
		return g.MemMB, nil
	}
	if err != nil {
		return g.MemMB, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMemFile+1))
	if err != nil {
		return g.MemMB, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if len(b) > maxMemFile || err != nil || !(v >= 0 && v <= fakegpu.MemTotalMB) {
		return g.MemMB, fmt.Errorf("%w: %s does not hold a memory figure in 0..%d MiB", ErrBadConfig, g.MemFile, fakegpu.MemTotalMB)
	}
	return v, nil
}

func f64bits(v float64) uint64 { return math.Float64bits(v) }

// currentSpeed reads what onFakeGPU stored (1 before it stored anything).
func currentSpeed(speed *atomic.Uint64) float64 {
	if b := speed.Load(); b != 0 {
		return math.Float64frombits(b)
	}
	return 1
}
