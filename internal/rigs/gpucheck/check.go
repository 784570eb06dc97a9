package gpucheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/lachesis-sched/lachesis/internal/rigs/gpuload"
	"github.com/lachesis-sched/lachesis/internal/util/printable"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// RawUtil counts the per-process utilisation samples NVML returned for
// one GPU since the previous diagnostic call: how many, for which pids,
// over what span. The agent keeps only their mean; the count and span say
// what that mean covers (NVML keeps a bounded history).
type RawUtil struct {
	GPU     int
	Since   uint64 // the timestamp asked with (µs; 0: everything NVML kept)
	Samples int
	PerPID  map[int]int
	First   uint64 // oldest and newest sample, µs
	Last    uint64
	Err     string
}

// RawProcess is one entry of NVML's MPS compute-process list.
type RawProcess struct {
	PID      int
	MemMiB   float64
	MemKnown bool
}

// Raw reads NVML beside the agent's path, for diagnostics only: nothing
// the check judges the agent by.
type Raw interface {
	UtilSamples(gpu int, since uint64) ([]nvml.ProcessUtilizationSample, error)
	MPSProcesses(gpu int) ([]nvml.ProcessInfo, error)
}

// NVMLRaw is Raw over an initialised NVML library (the one the agent's
// source opened).
type NVMLRaw struct{ Lib nvml.Interface }

var _ Raw = NVMLRaw{}

func (n NVMLRaw) device(gpu int) (nvml.Device, error) {
	d, ret := n.Lib.DeviceGetHandleByIndex(gpu)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("GPU %d: %v", gpu, ret)
	}
	return d, nil
}

// UtilSamples implements Raw. ERROR_NOT_FOUND (no newer sample) is no
// samples.
func (n NVMLRaw) UtilSamples(gpu int, since uint64) ([]nvml.ProcessUtilizationSample, error) {
	d, err := n.device(gpu)
	if err != nil {
		return nil, err
	}
	s, ret := d.GetProcessUtilization(since)
	switch ret {
	case nvml.SUCCESS:
		return s, nil
	case nvml.ERROR_NOT_FOUND:
		return nil, nil
	}
	return nil, fmt.Errorf("nvmlDeviceGetProcessUtilization: %v", ret)
}

// MPSProcesses implements Raw.
func (n NVMLRaw) MPSProcesses(gpu int) ([]nvml.ProcessInfo, error) {
	d, err := n.device(gpu)
	if err != nil {
		return nil, err
	}
	p, ret := d.GetMPSComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetMPSComputeRunningProcesses: %v", ret)
	}
	return p, nil
}

// Sources is what a check reads.
type Sources struct {
	// Agent is the node agent's own per-process source (telemetry.NVML,
	// opened as the agent opens it), AgentGPUs its device source (the
	// same value).
	Agent     telemetry.ProcessSource
	AgentGPUs telemetry.Source
	Driver    Driver
	Raw       Raw // nil: no diagnostics
	Clock     gpuload.Clock
	// Name gives a pid's command; nil reads /proc/PID/comm.
	Name func(pid int) string
}

// Config is one phase of the check.
type Config struct {
	Phase     string
	Loads     []Load
	Intervals []time.Duration
	Tol       Tolerance
	// MPS: the loads are MPS clients; read NVML's MPS list too and say
	// what the agent's list shows of them.
	MPS bool
	// Cadence, when set, polls NVML's per-process utilisation samples
	// (the diagnostic source) every cadenceEvery for this long after the
	// rounds: how often a new sample appears and what it reads, which
	// with a slow duty cycle shows the window one sample covers.
	Cadence time.Duration
	// BusyIsDemand: the loads together ask for more of the GPU's time
	// than it has, so each gets less than its busy share: the agent's
	// utilisation is held to pmon's only, and shown beside what was asked.
	BusyIsDemand bool
}

// Validate says what is wrong with c.
func (c Config) Validate() error {
	var errs []error
	if c.Phase == "" {
		errs = append(errs, errors.New("-phase: want a name"))
	}
	if (len(c.Intervals) == 0 && c.Cadence == 0) || len(c.Intervals) > 100 {
		errs = append(errs, errors.New("-intervals: want 1 to 100 intervals (or none with -cadence)"))
	}
	if c.Cadence < 0 || c.Cadence > 10*time.Minute {
		errs = append(errs, fmt.Errorf("-cadence %v: want 0 to 10m", c.Cadence))
	}
	for _, iv := range c.Intervals {
		if iv < time.Second || iv > 10*time.Minute {
			errs = append(errs, fmt.Errorf("-intervals %v: want 1s to 10m each", iv))
		}
	}
	seen := map[int]bool{}
	for _, l := range c.Loads {
		if seen[l.PID] {
			errs = append(errs, fmt.Errorf("-load: pid %d twice", l.PID))
		}
		seen[l.PID] = true
	}
	if c.Tol.MemMiB < 0 || c.Tol.OverheadMiB < 0 || c.Tol.UtilPts < 0 {
		errs = append(errs, errors.New("tolerances must not be negative"))
	}
	return errors.Join(errs...)
}

// ParseLoad reads a -load flag: NAME:PID:BUSY:MEMMIB, e.g. a:1234:60:2048.
func ParseLoad(s string) (Load, error) {
	f := strings.Split(s, ":")
	if len(f) != 4 || f[0] == "" {
		return Load{}, fmt.Errorf("load %q: want NAME:PID:BUSY:MEMMIB", s)
	}
	pid, err1 := strconv.Atoi(f[1])
	busy, err2 := strconv.ParseFloat(f[2], 64)
	mem, err3 := strconv.Atoi(f[3])
	if err1 != nil || pid <= 0 || err2 != nil || math.IsNaN(busy) || busy < 0 || busy > 100 || err3 != nil || mem < 0 {
		return Load{}, fmt.Errorf("load %q: want NAME:PID:BUSY:MEMMIB with a pid, 0-100 and MiB", s)
	}
	return Load{Name: printable.String(f[0]), PID: pid, BusyPct: busy, MemMiB: mem}, nil
}

// ParseIntervals reads a comma-separated list of durations; an empty
// string is none.
func ParseIntervals(s string) ([]time.Duration, error) {
	var out []time.Duration
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-intervals: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Result is a phase's rounds, their findings and how many failed.
type Result struct {
	Phase    string
	Loads    []Load
	Tol      Tolerance
	First    Round // the agent's first call: not judged
	Rounds   []Round
	Findings [][]Finding
	Fails    int
	// DriverOff counts the comparisons where the driver's own
	// per-process figure was as far off the load as the agent's.
	DriverOff int
	MPS       [][]string `json:",omitempty"`
	Cadence   []Cadence  `json:",omitempty"`
}

// Run is one phase: it calls the agent's source once (its first call,
// which reaches back over whatever NVML kept), then for each interval
// samples pmon over it, calls the agent's source again and reads the
// driver's lists at once, and compares them. Each round is printed to w
// as it ends.
func Run(ctx context.Context, cfg Config, src Sources, w io.Writer) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	if src.Name == nil {
		src.Name = procName
	}
	res := Result{Phase: cfg.Phase, Loads: cfg.Loads, Tol: cfg.Tol}
	fmt.Fprintf(w, "== phase %s: %s\n", cfg.Phase, loadsText(cfg.Loads))
	rawSince := map[int]uint64{}
	res.First = readRound(ctx, src, cfg, 0, 0, rawSince, false)
	printFirst(w, res.First)
	last := src.Clock.Now()
	for i, iv := range cfg.Intervals {
		type pmonOut struct {
			s   []PmonSample
			err error
		}
		pc := make(chan pmonOut, 1)
		go func() {
			s, err := src.Driver.Pmon(ctx, max(1, int(iv.Round(time.Second)/time.Second)))
			pc <- pmonOut{s, err}
		}()
		if err := src.Clock.Sleep(ctx, iv); err != nil {
			return res, err
		}
		p := <-pc
		now := src.Clock.Now()
		r := readRound(ctx, src, cfg, i+1, now.Sub(last), rawSince, true)
		last = now
		r.Pmon = p.s
		if p.err != nil {
			r.PmonErr = p.err.Error()
		}
		fs := Compare(cfg, r)
		res.Rounds = append(res.Rounds, r)
		res.Findings = append(res.Findings, fs)
		res.Fails += Fails(fs)
		res.DriverOff += DriverOff(fs)
		printRound(w, cfg, r, fs)
		if cfg.MPS {
			v := MPSView(cfg.Loads, r)
			res.MPS = append(res.MPS, v)
			for _, l := range v {
				fmt.Fprintln(w, "  MPS: "+l)
			}
		}
	}
	if cfg.Cadence > 0 {
		cs, err := sampleCadence(ctx, src, cfg.Cadence)
		if err != nil {
			return res, err
		}
		res.Cadence = cs
		printCadence(w, cs, cfg.Cadence)
	}
	verdict := "PASS"
	if res.Fails > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "== phase %s: %s (%d rounds, %d disagreement(s) of the agent with the driver beyond tolerance; %d where the driver's own figure was as far off the load)\n",
		cfg.Phase, verdict, len(res.Rounds), res.Fails, res.DriverOff)
	return res, nil
}

// readRound takes one round's readings: the agent's first (its figures
// are the ones judged), then the driver's, then the diagnostics.
func readRound(ctx context.Context, src Sources, cfg Config, index int, window time.Duration, rawSince map[int]uint64, driver bool) Round {
	r := Round{Index: index, Window: window, Names: map[int]string{}}
	procs, err := src.Agent.Processes()
	if err != nil {
		r.AgentErr = err.Error()
	}
	r.Agent = procs
	if gpus, err := src.AgentGPUs.Sample(); err != nil {
		if r.AgentErr == "" {
			r.AgentErr = err.Error()
		}
	} else {
		r.AgentGPUs = gpus
	}
	if driver {
		if r.Apps, err = src.Driver.ComputeApps(ctx); err != nil {
			r.AppsErr = err.Error()
		}
		if r.GPUs, err = src.Driver.GPUs(ctx); err != nil {
			r.GPUsErr = err.Error()
		}
	}
	if src.Raw != nil {
		for _, g := range r.AgentGPUs {
			u := RawUtil{GPU: g.Index, Since: rawSince[g.Index], PerPID: map[int]int{}}
			samples, err := src.Raw.UtilSamples(g.Index, u.Since)
			if err != nil {
				u.Err = err.Error()
			}
			for _, s := range samples {
				if s.TimeStamp <= u.Since {
					continue
				}
				u.Samples++
				u.PerPID[int(s.Pid)]++
				if u.First == 0 || s.TimeStamp < u.First {
					u.First = s.TimeStamp
				}
				u.Last = max(u.Last, s.TimeStamp)
			}
			if u.Last > 0 {
				rawSince[g.Index] = u.Last
			}
			r.Raw = append(r.Raw, u)
			if cfg.MPS {
				ps, err := src.Raw.MPSProcesses(g.Index)
				if err != nil {
					r.MPSErr = err.Error()
				}
				for _, p := range ps {
					rp := RawProcess{PID: int(p.Pid)}
					if p.UsedGpuMemory != math.MaxUint64 {
						rp.MemMiB, rp.MemKnown = float64(p.UsedGpuMemory)/(1<<20), true
					}
					r.MPS = append(r.MPS, rp)
				}
			}
		}
	}
	for _, pid := range r.pids(cfg.Loads) {
		if n := src.Name(pid); n != "" {
			r.Names[pid] = n
		}
	}
	return r
}

// pids are the processes a round is about, ascending: the loads, and
// every one the agent or the driver lists.
func (r Round) pids(loads []Load) []int {
	set := map[int]bool{}
	for _, l := range loads {
		set[l.PID] = true
	}
	for _, p := range r.Agent {
		set[p.PID] = true
	}
	for _, a := range r.Apps {
		set[a.PID] = true
	}
	for _, p := range r.MPS {
		set[p.PID] = true
	}
	out := make([]int, 0, len(set))
	for pid := range set {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// procName is a process's command as the kernel keeps it (15 bytes at
// most), made safe to print: any user can name a process anything.
func procName(pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 64))
	return printable.String(strings.TrimSpace(string(b)))
}

func loadsText(loads []Load) string {
	if len(loads) == 0 {
		return "no load started"
	}
	var parts []string
	for _, l := range loads {
		parts = append(parts, fmt.Sprintf("%s pid %d busy %.0f%% %d MiB", l.Name, l.PID, l.BusyPct, l.MemMiB))
	}
	return strings.Join(parts, "; ")
}

func printFirst(w io.Writer, r Round) {
	fmt.Fprintf(w, "  agent's first call (not judged: its samples reach back before the loads began):")
	if r.AgentErr != "" {
		fmt.Fprintf(w, " FAILED: %s\n", r.AgentErr)
		return
	}
	if len(r.Agent) == 0 {
		fmt.Fprint(w, " no process")
	}
	for _, p := range r.Agent {
		fmt.Fprintf(w, " %s %.1f MiB util %s;", r.name(p.PID, ""), p.MemUsedMB, utilText(p))
	}
	fmt.Fprintln(w)
	printRaw(w, r)
}

func printRaw(w io.Writer, r Round) {
	for _, u := range r.Raw {
		if u.Err != "" {
			fmt.Fprintf(w, "  NVML samples (diagnostic), GPU %d: %s\n", u.GPU, u.Err)
			continue
		}
		pids := make([]int, 0, len(u.PerPID))
		for pid := range u.PerPID {
			pids = append(pids, pid)
		}
		sort.Ints(pids)
		var per []string
		for _, pid := range pids {
			per = append(per, fmt.Sprintf("%d:%d", pid, u.PerPID[pid]))
		}
		span := 0.0
		if u.Samples > 0 {
			span = float64(u.Last-u.First) / 1e6
		}
		fmt.Fprintf(w, "  NVML samples (diagnostic), GPU %d: %d per-process utilisation samples spanning %.1f s (per pid %s)\n",
			u.GPU, u.Samples, span, strings.Join(per, " "))
	}
}

func printRound(w io.Writer, cfg Config, r Round, fs []Finding) {
	fmt.Fprintf(w, "-- round %d/%d: %.1f s since the agent's last call\n", r.Index, len(cfg.Intervals), r.Window.Seconds())
	fmt.Fprintf(w, "  %-8s %-16s %-5s %8s %10s %9s %8s %10s %8s %8s\n",
		"pid", "command", "load", "busy set", "agent util", "pmon sm", "MiB set", "agent MiB", "smi MiB", "pmon fb")
	for _, pid := range r.pids(cfg.Loads) {
		load, busy, set := "-", "-", "-"
		for _, l := range cfg.Loads {
			if l.PID == pid {
				load, busy, set = l.Name, fmt.Sprintf("%.0f%%", l.BusyPct), strconv.Itoa(l.MemMiB)
			}
		}
		util, amem := "absent", "absent"
		for _, p := range r.Agent {
			if p.PID == pid {
				util, amem = utilText(p), fmt.Sprintf("%.1f", p.MemUsedMB)
			}
		}
		smem := "absent"
		for _, a := range r.Apps {
			if a.PID == pid {
				smem = memText(a.MemMiB, a.MemKnown)
				smem = strings.TrimSuffix(smem, " MiB")
			}
		}
		pm := "-"
		if mean, known, total := PmonMean(r.Pmon, pid); total > 0 {
			pm = fmt.Sprintf("%.1f%%", mean)
			if known < total {
				pm = fmt.Sprintf("%.1f%%/%d", mean, known)
			}
			if known == 0 {
				pm = "n/a"
			}
		}
		fb := "-"
		for _, s := range r.Pmon {
			if s.PID == pid && s.FBKnown {
				fb = fmt.Sprintf("%.0f", s.FBMiB)
			}
		}
		name := r.Names[pid]
		if len(name) > 16 {
			name = name[:16]
		}
		fmt.Fprintf(w, "  %-8d %-16s %-5s %8s %10s %9s %8s %10s %8s %8s\n", pid, name, load, busy, util, pm, set, amem, smem, fb)
	}
	if r.GPUsErr != "" {
		fmt.Fprintf(w, "  nvidia-smi --query-gpu failed: %s\n", r.GPUsErr)
	}
	printRaw(w, r)
	for _, f := range fs {
		who := ""
		if f.PID != 0 {
			who = fmt.Sprintf("pid %d ", f.PID)
		}
		fmt.Fprintf(w, "  [%s] %s%s: %s\n", f.Verdict, who, f.What, f.Detail)
	}
}

// OpenAgent opens the node agent's GPU sources exactly as
// lachesis-node-agent does (telemetry.Open over go-nvml's library, the
// per-process source being the same value) and fails, naming why, where
// the agent would run with telemetry off. It returns the library too, for
// the diagnostics (NVMLRaw), and the source to close.
func OpenAgent(lib nvml.Interface, log *slog.Logger) (telemetry.Source, telemetry.ProcessSource, error) {
	gpus, err := telemetry.Open(lib, log)
	if err != nil {
		return nil, nil, fmt.Errorf("the agent's NVML source: %w", err)
	}
	procs, ok := gpus.(telemetry.ProcessSource)
	if !ok {
		_, why := gpus.Sample()
		return nil, nil, fmt.Errorf("the agent would run with GPU telemetry off: %v", why)
	}
	return gpus, procs, nil
}

// cadenceEvery is how often the cadence diagnostic asks NVML.
const cadenceEvery = 50 * time.Millisecond

// Cadence is one process's per-process utilisation samples as NVML
// handed them out over the cadence diagnostic: each new sample's age
// since the diagnostic began and its SM utilisation.
type Cadence struct {
	GPU    int
	PID    int
	AtMs   []int64
	SMUtil []uint32
	Polls  int
	// MaxPerPoll: the most samples of this pid one poll returned (asked
	// for everything NVML kept): the depth of its history.
	MaxPerPoll int
	PollErr    string `json:",omitempty"`
}

// sampleCadence polls every GPU the agent's source reports for d.
func sampleCadence(ctx context.Context, src Sources, d time.Duration) ([]Cadence, error) {
	if src.Raw == nil {
		return nil, errors.New("-cadence needs NVML's diagnostics")
	}
	gpus, err := src.AgentGPUs.Sample()
	if err != nil {
		return nil, err
	}
	type key struct{ gpu, pid int }
	series := map[key]*Cadence{}
	var order []key
	seen := map[key]uint64{}
	start := src.Clock.Now()
	polls := 0
	var pollErr string
	for src.Clock.Now().Sub(start) < d {
		polls++
		for _, g := range gpus {
			samples, err := src.Raw.UtilSamples(g.Index, 0)
			if err != nil {
				pollErr = err.Error()
				continue
			}
			// The newest sample of each pid, and how many NVML handed out
			// for it at once (its history, where it keeps one).
			newest := map[int]nvml.ProcessUtilizationSample{}
			held := map[int]int{}
			for _, s := range samples {
				pid := int(s.Pid)
				held[pid]++
				if s.TimeStamp > newest[pid].TimeStamp {
					newest[pid] = s
				}
			}
			for pid, s := range newest {
				k := key{g.Index, pid}
				c := series[k]
				if c == nil {
					c = &Cadence{GPU: g.Index, PID: pid}
					series[k] = c
					order = append(order, k)
				}
				c.MaxPerPoll = max(c.MaxPerPoll, held[pid])
				if s.TimeStamp <= seen[k] {
					continue
				}
				seen[k] = s.TimeStamp
				c.AtMs = append(c.AtMs, src.Clock.Now().Sub(start).Milliseconds())
				c.SMUtil = append(c.SMUtil, s.SmUtil)
			}
		}
		if err := src.Clock.Sleep(ctx, cadenceEvery); err != nil {
			return nil, err
		}
	}
	out := make([]Cadence, 0, len(order))
	for _, k := range order {
		c := *series[k]
		c.Polls, c.PollErr = polls, pollErr
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		return out[i].PID < out[j].PID
	})
	return out, nil
}

func printCadence(w io.Writer, cs []Cadence, d time.Duration) {
	fmt.Fprintf(w, "-- cadence (diagnostic): NVML's per-process samples polled every %v for %v\n", cadenceEvery, d)
	if len(cs) == 0 {
		fmt.Fprintln(w, "  no per-process sample appeared")
	}
	for _, c := range cs {
		gap := "-"
		if n := len(c.AtMs); n > 1 {
			gap = fmt.Sprintf("%.0f ms", float64(c.AtMs[n-1]-c.AtMs[0])/float64(n-1))
		}
		var vals []string
		for i := range c.AtMs {
			vals = append(vals, fmt.Sprintf("%d@%.1fs", c.SMUtil[i], float64(c.AtMs[i])/1000))
		}
		fmt.Fprintf(w, "  GPU %d pid %d: %d new samples in %d polls (at most %d kept at once), one every %s: %s\n",
			c.GPU, c.PID, len(c.AtMs), c.Polls, c.MaxPerPoll, gap, strings.Join(vals, " "))
		if c.PollErr != "" {
			fmt.Fprintf(w, "  (a poll failed: %s)\n", c.PollErr)
		}
	}
}
