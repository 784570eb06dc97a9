package demo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// The sharing part (issue 22): one workload on one node of fake GPUs, run
// with sharing off (every job guaranteed, on whole GPUs) and on (jobs that
// leave most of a GPU idle get a share of one; the jobs marked
// opportunistic go to the opportunistic partition, onto idle GPUs and
// beside them). Every job is lachesis-synth on the node agent's fake GPU
// device, so the GPU use in the table is what the agent measured.

// The synthetic job's pace: one loader waiting ShareSpin per sample, Batch
// samples per step, so ShareStepsPerSecond steps a second alone, whatever
// its utilisation (the GPU step is shorter than the loader's wait).
const (
	ShareSpin           = 10 * time.Millisecond
	ShareBatch          = 4
	ShareStepsPerSecond = 25 // 1 / (ShareBatch × ShareSpin)
	// ShareSpeed is each job's speed while another process shares its GPU
	// (the GPU step takes 1/ShareSpeed as long); a job whose step then no
	// longer fits in its loader's wait slows down.
	ShareSpeed = 0.7
	// OppPartition is the opportunistic partition, as
	// etc/slurm.conf.lachesis documents it.
	OppPartition = "PartitionName=opp Nodes=ALL MaxTime=INFINITE State=UP"
)

// ParseSharingWorkload reads "name,arrival_s,gpus,work_s,class,util_pct"
// lines ('#' comments and one header line allowed): gpus is 1 (a whole
// GPU) or a share of one in steps of 1/shardsPerGPU, class "guaranteed" or
// "opportunistic", util_pct the GPU utilisation the job drives alone.
func ParseSharingWorkload(r io.Reader, shardsPerGPU int) ([]Job, error) {
	rows, err := workloadRows(r)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for i, row := range rows {
		if i == 0 && row[0] == "name" {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("%w: line %d %q: %s", ErrWorkload, i+1, strings.Join(row, ","), why)
		}
		if len(row) != 6 {
			return nil, bad("want 6 fields: name,arrival_s,gpus,work_s,class,util_pct")
		}
		arr, err1 := strconv.ParseFloat(row[1], 64)
		gpus, err2 := strconv.ParseFloat(row[2], 64)
		work, err3 := strconv.ParseFloat(row[3], 64)
		util, err4 := strconv.ParseFloat(row[5], 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil || !(arr >= 0 && arr < 3600) ||
			!(work > 0 && work < 3600) || !(util > 0 && util <= 100) || row[0] == "" {
			return nil, bad("need a name, 0 <= arrival < 3600, 0 < work < 3600, 0 < util_pct <= 100")
		}
		shards := gpus * float64(shardsPerGPU)
		if !(gpus > 0 && gpus <= 1) || math.Abs(shards-math.Round(shards)) > 1e-9 {
			return nil, bad(fmt.Sprintf("gpus must be 1 or a multiple of 1/%d below it", shardsPerGPU))
		}
		var opp bool
		switch row[4] {
		case "guaranteed":
		case "opportunistic":
			opp = true
		default:
			return nil, bad("class must be guaranteed or opportunistic")
		}
		j := Job{Name: row[0], Arrival: time.Duration(arr * float64(time.Second)), GPUs: 1,
			Work: time.Duration(work * float64(time.Second)), Opportunistic: opp, UtilPct: util}
		if gpus < 1 {
			j.Share = gpus
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: no jobs", ErrWorkload)
	}
	return jobs, nil
}

// ShareAlloc is the GPUs job j holds when it runs: its share of one with
// sharing on, its whole GPUs otherwise.
func ShareAlloc(j Job, sharing bool) float64 {
	if sharing && j.Share > 0 {
		return j.Share
	}
	return float64(j.GPUs)
}

// ShareRequest is j's sbatch GPU request: whole GPUs with sharing off;
// with it on, shards (Slurm 22.05 gives a GPU out whole or as shards,
// never both, so whole GPUs are all their shards too) and the
// opportunistic partition for opportunistic jobs.
func ShareRequest(j Job, sharing bool, shardsPerGPU int) []string {
	if !sharing {
		return []string{"--gpus=" + strconv.Itoa(j.GPUs)}
	}
	shards := int(math.Round(ShareAlloc(j, true) * float64(shardsPerGPU)))
	args := []string{"--gres=shard:" + strconv.Itoa(shards)}
	if j.Opportunistic {
		args = append(args, "-p", "opp")
	}
	return args
}

// SynthCommand is the --wrap running j as lachesis-synth on the fake GPU
// device: one input-bound loader and a knee of 100/util_pct, so the GPU
// step keeps the GPU busy util_pct of the time alone; Work seconds of
// steps in all, counted across requeues in ckpt.
func SynthCommand(j Job, synth, fakeDir, dataDir, ckpt string) string {
	steps := int(math.Round(j.Work.Seconds() * ShareStepsPerSecond))
	return fmt.Sprintf("exec %s -io-wait -workers 1 -knee %.4g -spin %s -batch %d -steps %d -seconds 0 -report 1s"+
		" -checkpoint %s -data %s -data-mb 1 -fake-gpu-dir %s -shared-speed %g",
		synth, 100/j.UtilPct, ShareSpin, ShareBatch, steps, ckpt, filepath.Join(dataDir, j.Name), fakeDir, ShareSpeed)
}

// ShareSample is one look at the node during a run, in GPUs: how many
// the running jobs hold and how busy the agent measured them.
type ShareSample struct {
	Alloc, Busy float64
}

// ShareProbe gathers one scenario's samples.
type ShareProbe struct {
	Sharing bool
	Metrics string // the agent's /metrics address
	Samples []ShareSample
	client  http.Client
}

// Sample adds one sample: the allocation from the jobs Slurm runs, the
// busy GPUs from the agent's per-job utilisation (a failed scrape skips
// the sample).
func (p *ShareProbe) Sample(out []Outcome, states map[uint32]slurmcluster.Job) {
	var s ShareSample
	for _, o := range out {
		if o.ID != 0 && states[o.ID].State == "RUNNING" {
			s.Alloc += ShareAlloc(o.Job, p.Sharing)
		}
	}
	p.client.Timeout = 2 * time.Second
	resp, err := p.client.Get("http://" + p.Metrics + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	busy, err := SumJobGPUUtil(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return
	}
	s.Busy = busy / 100
	p.Samples = append(p.Samples, s)
}

// jobGPUUtil is the agent's per-job, per-GPU utilisation series
// (node-agent/agent.MetricJobGPUUtil).
const jobGPUUtil = "lachesis_agent_job_gpu_utilization_percent"

// SumJobGPUUtil adds up every job's utilisation of every GPU in a
// Prometheus text scrape, in percent of one GPU.
func SumJobGPUUtil(r io.Reader) (float64, error) {
	sum := 0.0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), jobGPUUtil+"{")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		v, err := strconv.ParseFloat(rest[i+1:], 64)
		if err != nil || i < 0 || !(v >= 0 && v <= 100) {
			return 0, fmt.Errorf("%w: /metrics line %q", ErrWorkload, sc.Text())
		}
		sum += v
	}
	return sum, sc.Err()
}

// ShareSummary is one scenario's row of the sharing table.
type ShareSummary struct {
	Label string
	// Alloc and Busy: mean GPUs held and measured busy over the run, as a
	// fraction of the node's GPUs. Useful: the GPU time the jobs' work
	// takes alone (work × utilisation alone, from the workload) over the
	// node's GPU time until the last job ended; Busy above it is time lost
	// to interference, which a GPU's utilisation counts as busy.
	Alloc, Busy, Useful float64
	// Guaranteed and Opportunistic: the classes' mean JCT (with sharing
	// off, of the jobs marked opportunistic, run as guaranteed ones).
	Guaranteed, Opportunistic time.Duration
	// OppPerMin: jobs marked opportunistic done per minute, from the first
	// submission to the last of them ending.
	OppPerMin float64
	Makespan  time.Duration
	// Requeues of guaranteed and of opportunistic jobs.
	GuarRequeues, OppRequeues int
}

// SummarizeSharing makes a scenario's row from its outcomes and samples
// on a node of gpus GPUs.
func SummarizeSharing(label string, out []Outcome, samples []ShareSample, gpus int) ShareSummary {
	s := ShareSummary{Label: label}
	for _, x := range samples {
		s.Alloc += x.Alloc
		s.Busy += x.Busy
	}
	if n := float64(len(samples) * max(gpus, 1)); n > 0 {
		s.Alloc, s.Busy = s.Alloc/n, s.Busy/n
	}
	var guar, opp []Outcome
	var first, last, lastOpp time.Time
	useful := 0.0 // GPU-seconds
	for _, o := range out {
		useful += o.Job.Work.Seconds() * o.Job.UtilPct / 100
		if first.IsZero() || o.Submit.Before(first) {
			first = o.Submit
		}
		last = later(last, o.End)
		if o.Job.Opportunistic {
			opp = append(opp, o)
			s.OppRequeues += o.Restarts
			lastOpp = later(lastOpp, o.End)
		} else {
			guar = append(guar, o)
			s.GuarRequeues += o.Restarts
		}
	}
	if len(guar) > 0 {
		s.Guaranteed = Average(guar)
	}
	if len(opp) > 0 {
		s.Opportunistic = Average(opp)
		if d := lastOpp.Sub(first); d > 0 {
			s.OppPerMin = float64(len(opp)) / d.Minutes()
		}
	}
	if !first.IsZero() {
		s.Makespan = last.Sub(first)
	}
	if s.Makespan > 0 {
		s.Useful = useful / (s.Makespan.Seconds() * float64(max(gpus, 1)))
	}
	return s
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ReportSharing prints the two scenarios side by side, with the on/off
// ratio of each figure, so that a figure sharing makes worse reads as
// worse.
func ReportSharing(w io.Writer, off, on ShareSummary) {
	fmt.Fprintf(w, "\n%-40s | %12s | %12s | %s\n", "", off.Label, on.Label, on.Label+"/"+off.Label)
	pct := func(name string, a, b float64) {
		fmt.Fprintf(w, "%-40s | %11.0f%% | %11.0f%% | %s\n", name, 100*a, 100*b, ratio(b, a))
	}
	secs := func(name string, a, b time.Duration) {
		fmt.Fprintf(w, "%-40s | %10.1f s | %10.1f s | %s\n", name, a.Seconds(), b.Seconds(), ratio(b.Seconds(), a.Seconds()))
	}
	pct("GPUs allocated (mean over the run)", off.Alloc, on.Alloc)
	pct("GPUs busy, measured by the node agent", off.Busy, on.Busy)
	pct("useful GPU work (work x util alone)", off.Useful, on.Useful)
	secs("guaranteed jobs' average JCT", off.Guaranteed, on.Guaranteed)
	secs("opportunistic jobs' average JCT", off.Opportunistic, on.Opportunistic)
	fmt.Fprintf(w, "%-40s | %12.2f | %12.2f | %s\n", "opportunistic jobs done per minute", off.OppPerMin, on.OppPerMin, ratio(on.OppPerMin, off.OppPerMin))
	secs("all jobs done after (makespan)", off.Makespan, on.Makespan)
	fmt.Fprintf(w, "%-40s | %12s | %12s |\n", "requeues (guaranteed/opportunistic)",
		fmt.Sprintf("%d/%d", off.GuarRequeues, off.OppRequeues), fmt.Sprintf("%d/%d", on.GuarRequeues, on.OppRequeues))
	fmt.Fprintln(w, "With sharing off, the jobs marked opportunistic run as guaranteed ones on whole GPUs. A share (shards)")
	fmt.Fprintln(w, "does not fence a job: it may keep its GPU busier than its share when its neighbour leaves cycles idle.")
	fmt.Fprintln(w, "Busy is the agent's per-job utilisation summed: it counts steps slowed by a neighbour, as NVML does.")
	switch {
	case on.Guaranteed > off.Guaranteed*105/100:
		fmt.Fprintf(w, "Sharing cost the guaranteed jobs %.0f%% of their JCT here: more than the 5%% it may.\n",
			100*(on.Guaranteed.Seconds()/off.Guaranteed.Seconds()-1))
	case on.Busy <= off.Busy && on.Makespan >= off.Makespan:
		fmt.Fprintln(w, "Sharing did not help on this workload: GPUs no busier, the work no sooner done.")
	}
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("x%.2f", a/b)
}

// SharingPart runs the sharing workload on one node of gpus fake GPUs of
// shardsPerGPU shards each, with the node agent and its fake GPU device,
// sharing off then on, and prints the table.
type SharingPart struct {
	Root, Dir, Bin string // repository, cluster directory, built commands
	Fragment       string // etc/slurm.conf.lachesis
	Jobs           []Job
	Results        string // per-job CSV ("": none)
	GPUs, Shards   int
	PortBase       int // 0: the cluster script's default
	Out            io.Writer
	Live           bool
}

// Run runs both scenarios and prints the comparison.
func (p SharingPart) Run(ctx context.Context) error {
	fmt.Fprintf(p.Out, "\n== Sharing: %d jobs on 1 node x %d fake GPUs (%d shards each), first with sharing off, then on.\n",
		len(p.Jobs), p.GPUs, p.Shards)
	runner := &Runner{Root: p.Root, Dir: p.Dir, Nodes: 1, GPUs: p.GPUs, Out: p.Out, Live: p.Live,
		PollEvery: time.Second, Cgroups: true, ShardsPerGPU: p.Shards, PortBase: p.PortBase}
	var rows []ShareSummary
	var outs [][]Outcome
	for _, sharing := range []bool{false, true} {
		label := map[bool]string{false: "sharing off", true: "sharing on"}[sharing]
		s, probe, err := p.scenario(label, sharing)
		if err != nil {
			return err
		}
		out, err := runner.Run(ctx, s, p.Jobs)
		if err != nil {
			return fmt.Errorf("%s run: %w", label, err)
		}
		rows = append(rows, SummarizeSharing(label, out, probe.Samples, p.GPUs))
		outs = append(outs, out)
		fmt.Fprintf(p.Out, "\n%s run done (%d samples of the agent's /metrics).\n", label, len(probe.Samples))
	}
	Report(p.Out, rows[0].Label, outs[0], rows[1].Label, outs[1], false)
	ReportSharing(p.Out, rows[0], rows[1])
	if p.Results != "" {
		if err := os.MkdirAll(filepath.Dir(p.Results), 0o755); err == nil {
			if err := WriteCSV(p.Results, rows[0].Label, outs[0], rows[1].Label, outs[1]); err == nil {
				fmt.Fprintf(p.Out, "per-job results: %s\n", p.Results)
			}
		}
	}
	return nil
}

// scenario is one run's configuration: Lachesis with the opportunistic
// partition and the agent's listener in both, the jobs' requests as
// sharing says, and the node agent on the fake GPU device.
func (p SharingPart) scenario(label string, sharing bool) (Scenario, *ShareProbe, error) {
	listen, err := freeTCPAddr()
	if err != nil {
		return Scenario{}, nil, err
	}
	metrics, err := freeTCPAddr()
	if err != nil {
		return Scenario{}, nil, err
	}
	fakeDir := filepath.Join(p.Dir, "fakegpu")
	dataDir := filepath.Join(p.Dir, "sharedata")
	socket := filepath.Join(p.Dir, "agent.sock")
	probe := &ShareProbe{Sharing: sharing, Metrics: metrics}
	synth := filepath.Join(p.Bin, "lachesis-synth")
	s := Scenario{
		Label: label, Priority: "priority/tiresias", Preempt: "preempt/tiresias",
		Extra: p.Fragment + "\n" + OppPartition + "\n",
		YAML: fmt.Sprintf("pass_interval: 1\ndb_path: %s\nagent:\n  listen: %s\nsharing:\n  opportunistic_partition: opp\n",
			filepath.Join(p.Dir, "lachesis", "lachesis.db"), listen),
		Command: func(j Job, ckpt string) []string {
			return append(ShareRequest(j, sharing, p.Shards), "--wrap", SynthCommand(j, synth, fakeDir, dataDir, ckpt))
		},
		Sample: probe.Sample,
		Start: func(ctx context.Context, c *slurmcluster.Cluster) (func(), error) {
			// No record of the last run's jobs, no dataset to share.
			os.RemoveAll(fakeDir)
			os.RemoveAll(dataDir)
			if err := os.MkdirAll(dataDir, 0o755); err != nil {
				return nil, err
			}
			yaml := fmt.Sprintf("controller: %s\nmunge_socket: %s\nspool: %s\nsocket: %s\nnode: lnode1\n"+
				"telemetry_interval: 1\nfake_gpu:\n  dir: %s\n  gpus: %d\nmetrics:\n  listen: %q\n",
				listen, mungeSocketOf(c.Conf), filepath.Join(p.Dir, "agent-spool", "spool.db"), socket, fakeDir, p.GPUs, metrics)
			return startNodeAgent(ctx, nodeAgent{Bin: p.Bin, Dir: p.Dir, YAML: yaml, Socket: socket,
				SlurmConf: c.Conf, Out: io.Discard})
		},
	}
	return s, probe, nil
}
