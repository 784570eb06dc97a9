package telemetry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lachesis-sched/lachesis/internal/protocol/fakegpu"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/procjob"
)

// Bounds of the fake device (internal/protocol/fakegpu has the record's).
const (
	// FakeGPUName is the fake GPUs' device name.
	FakeGPUName = "Lachesis fake GPU"
	// MaxFakeGPUs bounds the fake device's GPU count.
	MaxFakeGPUs = 64
)

// Reasons a fake record is ignored (label of MetricFakeIgnored).
const (
	IgnoredTooMany    = "too_many"
	IgnoredNotRegular = "not_regular"
	IgnoredTooLarge   = "too_large"
	IgnoredMalformed  = "malformed"
	IgnoredStale      = "stale"
	IgnoredPIDGone    = "pid_gone"
	IgnoredNotOwner   = "not_owner"
	IgnoredDuplicate  = "duplicate"
)

var ignoredReasons = []string{IgnoredTooMany, IgnoredNotRegular, IgnoredTooLarge, IgnoredMalformed,
	IgnoredStale, IgnoredPIDGone, IgnoredNotOwner, IgnoredDuplicate}

// MetricFakeIgnored counts the fake device's ignored records.
const MetricFakeIgnored = "lachesis_agent_fake_gpu_records_ignored_total"

// Fake is a GPU device for machines without one (the loopback cluster, the
// demo, CI; never a production node): a Source and a ProcessSource whose
// GPUs are what the processes running "on" them wrote into Dir. It fakes
// the device, not the path: the agent maps its processes to jobs and
// reports them exactly as it does NVML's.
//
// Dir is hostile input (every user may write it; the agent makes it
// sticky and world-writable): at most fakegpu.MaxRecords entries are read,
// each a regular file of at most fakegpu.MaxRecordBytes opened without
// following links; a record is believed only if its file's owner is the
// owner of the live process it names, it was refreshed within
// fakegpu.Stale and its numbers are in range. Everything else is
// ignored and counted by reason.
type Fake struct {
	Dir  string
	GPUs int
	// Node names the fake GPUs' UUIDs (GPU-fake-<node>-<index>).
	Node string
	// PIDOwner returns the real uid of a live process (false if there is
	// none); nil means procjob.Owner (/proc). Tests replace it.
	PIDOwner func(pid int) (uint32, bool)
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu      sync.Mutex
	ignored map[string]uint64
}

var (
	_ Source               = (*Fake)(nil)
	_ ProcessSource        = (*Fake)(nil)
	_ prometheus.Collector = (*Fake)(nil)
)

// ErrFake wraps the fake device's failures (its directory unreadable).
var ErrFake = errors.New("fake GPU device")

// PrepareFakeDir makes dir, if missing, world-writable and sticky (like
// /tmp: each user's records can be removed only by their owner); an
// existing dir must be a directory, not a link.
func PrepareFakeDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%w: %w", ErrFake, err)
		}
		if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
			return fmt.Errorf("%w: %w", ErrFake, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", ErrFake, err)
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrFake, dir)
	}
	return nil
}

// Sample implements Source: each fake GPU's utilisation is the sum of its
// processes' (at most 100), its memory the sum of theirs (at most
// fakegpu.MemTotalMB).
func (f *Fake) Sample() ([]wire.GPU, error) {
	recs, err := f.read()
	if err != nil {
		return nil, err
	}
	gpus := make([]wire.GPU, f.GPUs)
	for i := range gpus {
		gpus[i] = wire.GPU{Index: i, UUID: f.uuid(i), Name: FakeGPUName, MemTotalMB: fakegpu.MemTotalMB}
	}
	for _, r := range recs {
		for _, i := range r.GPUs {
			gpus[i].UtilPct = min(100, gpus[i].UtilPct+r.UtilPct)
			gpus[i].MemUsedMB = min(fakegpu.MemTotalMB, gpus[i].MemUsedMB+r.MemMB)
		}
	}
	return gpus, nil
}

// Processes implements ProcessSource: one entry per believed record and
// GPU it names.
func (f *Fake) Processes() ([]GPUProcess, error) {
	recs, err := f.read()
	if err != nil {
		return nil, err
	}
	var out []GPUProcess
	for _, r := range recs {
		for _, i := range r.GPUs {
			out = append(out, GPUProcess{GPU: i, UUID: f.uuid(i), PID: r.PID,
				MemUsedMB: r.MemMB, MemTotalMB: fakegpu.MemTotalMB, UtilPct: r.UtilPct, UtilKnown: true})
		}
	}
	return out, nil
}

// Close implements Source.
func (*Fake) Close() error { return nil }

func (f *Fake) uuid(i int) string { return fmt.Sprintf("GPU-fake-%s-%d", f.Node, i) }

// read returns the records believed now, counting the others.
func (f *Fake) read() ([]fakegpu.Record, error) {
	names, more, err := fakegpu.List(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFake, err)
	}
	if more {
		f.count(IgnoredTooMany)
	}
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	seen := map[int]bool{}
	var out []fakegpu.Record
	for _, name := range names {
		r, why := f.believe(filepath.Join(f.Dir, name), now())
		if why == "" && seen[r.PID] {
			why = IgnoredDuplicate
		}
		if why != "" {
			f.count(why)
			continue
		}
		seen[r.PID] = true
		out = append(out, r)
	}
	return out, nil
}

// believe reads and judges one record; why is the reason it is not
// believed ("" if it is).
func (f *Fake) believe(path string, now time.Time) (fakegpu.Record, string) {
	r, err := fakegpu.Read(path)
	switch {
	case errors.Is(err, fakegpu.ErrTooLarge):
		return r.Record, IgnoredTooLarge
	case errors.Is(err, fakegpu.ErrMalformed):
		return r.Record, IgnoredMalformed
	case err != nil:
		return r.Record, IgnoredNotRegular
	case now.Sub(r.ModTime) > fakegpu.Stale:
		return r.Record, IgnoredStale
	case !f.valid(r.Record):
		return r.Record, IgnoredMalformed
	}
	owner := f.PIDOwner
	if owner == nil {
		owner = procjob.Owner
	}
	uid, alive := owner(r.PID)
	switch {
	case !alive:
		return r.Record, IgnoredPIDGone
	case uid != r.UID:
		return r.Record, IgnoredNotOwner
	}
	return r.Record, ""
}

// valid (NaN fails every comparison): a live-looking pid, 1 to GPUs distinct GPUs of this device,
// utilisation 0..100 and memory within a GPU.
func (f *Fake) valid(r fakegpu.Record) bool {
	if r.PID <= 0 || len(r.GPUs) == 0 || len(r.GPUs) > f.GPUs ||
		!(r.UtilPct >= 0 && r.UtilPct <= 100) || !(r.MemMB >= 0 && r.MemMB <= fakegpu.MemTotalMB) {
		return false
	}
	for k, i := range r.GPUs {
		if i < 0 || i >= f.GPUs {
			return false
		}
		for _, j := range r.GPUs[:k] {
			if i == j {
				return false
			}
		}
	}
	return true
}

func (f *Fake) count(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ignored == nil {
		f.ignored = map[string]uint64{}
	}
	f.ignored[why]++
}

// Ignored is how many records were ignored so far, by reason.
func (f *Fake) Ignored() map[string]uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]uint64, len(ignoredReasons))
	for _, r := range ignoredReasons {
		out[r] = f.ignored[r]
	}
	return out
}

var fakeIgnoredDesc = prometheus.NewDesc(MetricFakeIgnored,
	"Records in the fake GPU device's directory that were not believed, by reason (test/demo device only).",
	[]string{"reason"}, nil)

// Describe implements prometheus.Collector.
func (*Fake) Describe(ch chan<- *prometheus.Desc) { ch <- fakeIgnoredDesc }

// Collect implements prometheus.Collector.
func (f *Fake) Collect(ch chan<- prometheus.Metric) {
	for r, n := range f.Ignored() {
		ch <- prometheus.MustNewConstMetric(fakeIgnoredDesc, prometheus.CounterValue, float64(n), r)
	}
}
