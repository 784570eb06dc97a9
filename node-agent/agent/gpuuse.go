package agent

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/deliver"
	"github.com/lachesis-sched/lachesis/node-agent/procjob"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
)

// ProgressSource says how far the jobs that opted in got (iterations and
// their rate), by job id; the progress package implements it.
type ProgressSource interface {
	Progress(now time.Time) map[uint32]wire.JobProgress
}

// ProcessJobLookup finds the Slurm job of a GPU process and the real uid
// that owns it, from the kernel (procjob.GPUProcessJob in production); why
// says why it is in none (procjob.NoJob, procjob.Gone).
type ProcessJobLookup func(pid int) (job, uid uint32, why string)

// Reasons of MetricGPUProcessesOutsideJobs beside procjob's NoJob and
// Gone. outsideOtherUID: a GPU process runs under another uid than its
// job's other processes on this node. outsideMPSServer: CUDA MPS's server
// (procjob.MPSServer), which serves the clients of jobs: the device
// lists each client by its own pid with its memory, and charges all the
// clients' utilisation to the server's pid.
const (
	outsideOtherUID  = "other_uid"
	outsideMPSServer = "mps_server"
)

// gpuUseOf aggregates the GPU processes of one sample into per-job GPU use
// per GPU: utilisation (summed over the job's processes whose utilisation
// the device knows, at most 100; UtilUnknown where it knows none's),
// memory summed, the GPU's memory (what the device says), Sharers the
// number of jobs on that GPU, plus one where processes no job accounts
// for use it too. Processes not in a job are counted in outside by
// reason, never attributed to a job; a gone one (vanished, or a zombie:
// procjob.Read) is neither a job's nor a sharer nor unaccounted, it holds
// nothing; those of no job or another uid than
// their job's are reported as unaccounted use per GPU and uid (the
// controller charges it to that user's guests on the GPU: a guest whose
// process left its step's tree on a node without job cgroups is still
// bounded). The MPS server (isMPSServer) is neither a job's nor a sharer:
// its memory is unaccounted use, its utilisation, which is its clients'
// (each attributed to its own job by pid), is not counted twice. The
// jobs come sorted by id, their GPUs by index, unaccounted use by GPU and
// uid, all within wire's bounds.
func gpuUseOf(procs []telemetry.GPUProcess, jobOf ProcessJobLookup, isMPSServer func(pid int) bool) (jobs []wire.JobUsage, unaccounted []wire.UnaccountedGPUUse, outside map[string]int) {
	outside = map[string]int{procjob.NoJob: 0, procjob.Gone: 0, outsideOtherUID: 0, outsideMPSServer: 0}
	type key struct {
		job uint32
		gpu int
	}
	type look struct {
		job, uid uint32
		why      string
		mps      bool
	}
	type stray struct {
		gpu int
		uid uint32
	}
	looked := map[int]look{}
	owner := map[uint32]uint32{}
	use := map[key]*wire.JobGPUUsage{}
	strays := map[stray]*wire.UnaccountedGPUUse{}
	onGPU := map[int]map[uint32]bool{}
	strayOn := map[int]bool{}
	utilKnown := map[key]bool{}
	// In pid order, so that a job's uid is its lowest pid's, whatever
	// order the device lists them in.
	procs = slices.Clone(procs)
	slices.SortStableFunc(procs, func(a, b telemetry.GPUProcess) int { return cmp.Compare(a.PID, b.PID) })
	unaccount := func(p telemetry.GPUProcess, uid uint32, util float64, sharer bool) {
		k := stray{p.GPU, uid}
		g := strays[k]
		if g == nil {
			if len(strays) == wire.MaxUnaccounted || p.GPU < 0 || p.GPU >= wire.MaxGPUs {
				return
			}
			g = &wire.UnaccountedGPUUse{Index: p.GPU, UUID: p.UUID, UID: uid}
			strays[k] = g
		}
		g.Processes = min(g.Processes+1, wire.MaxUsageJobs*64)
		g.UtilPct = min(100, g.UtilPct+max(0, util))
		g.MemUsedMB = min(wire.MaxGPUMemMB, g.MemUsedMB+max(0, p.MemUsedMB))
		if p.MemTotalMB > 0 && p.MemTotalMB <= wire.MaxGPUMemMB {
			g.MemTotalMB = p.MemTotalMB
		}
		strayOn[p.GPU] = strayOn[p.GPU] || sharer
	}
	for _, p := range procs {
		l, ok := looked[p.PID]
		if !ok {
			l.job, l.uid, l.why = jobOf(p.PID)
			if l.why == "" && l.job == 0 {
				l.why = procjob.NoJob
			}
			l.mps = l.why == procjob.NoJob && isMPSServer != nil && isMPSServer(p.PID)
			looked[p.PID] = l
		}
		switch {
		case l.mps:
			outside[outsideMPSServer]++
			unaccount(p, l.uid, 0, false)
			continue
		case l.why == procjob.NoJob:
			outside[l.why]++
			unaccount(p, l.uid, knownUtil(p), true)
			continue
		case l.why != "":
			outside[l.why]++
			continue
		}
		if u, ok := owner[l.job]; ok && u != l.uid {
			outside[outsideOtherUID]++
			unaccount(p, l.uid, knownUtil(p), true)
			continue
		}
		owner[l.job] = l.uid
		k := key{l.job, p.GPU}
		g := use[k]
		if g == nil {
			g = &wire.JobGPUUsage{Index: p.GPU, UUID: p.UUID}
			use[k] = g
		}
		if p.UtilKnown {
			g.UtilPct = min(100, g.UtilPct+max(0, p.UtilPct))
			utilKnown[k] = true
		}
		g.MemUsedMB = min(wire.MaxGPUMemMB, g.MemUsedMB+max(0, p.MemUsedMB))
		if p.MemTotalMB > 0 && p.MemTotalMB <= wire.MaxGPUMemMB {
			g.MemTotalMB = p.MemTotalMB
		}
		if onGPU[p.GPU] == nil {
			onGPU[p.GPU] = map[uint32]bool{}
		}
		onGPU[p.GPU][l.job] = true
	}
	for _, g := range strays {
		unaccounted = append(unaccounted, *g)
	}
	slices.SortFunc(unaccounted, func(a, b wire.UnaccountedGPUUse) int {
		return cmp.Or(cmp.Compare(a.Index, b.Index), cmp.Compare(a.UID, b.UID))
	})
	keys := make([]key, 0, len(use))
	for k := range use {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.job, b.job), cmp.Compare(a.gpu, b.gpu)) })
	gpus := 0
	for _, k := range keys {
		if k.gpu < 0 || k.gpu >= wire.MaxGPUs || gpus == wire.MaxGPUs {
			continue
		}
		if len(jobs) == 0 || jobs[len(jobs)-1].JobID != k.job {
			if len(jobs) == wire.MaxUsageJobs {
				break
			}
			jobs = append(jobs, wire.JobUsage{JobID: k.job, UID: owner[k.job]})
		}
		g := *use[k]
		g.UtilUnknown = !utilKnown[k]
		g.Sharers = len(onGPU[k.gpu])
		if strayOn[k.gpu] {
			g.Sharers++
		}
		j := &jobs[len(jobs)-1]
		j.GPUs = append(j.GPUs, g)
		gpus++
	}
	return jobs, unaccounted, outside
}

// knownUtil is a process's utilisation where the device knows it, else 0
// (unknown, added as nothing).
func knownUtil(p telemetry.GPUProcess) float64 {
	if !p.UtilKnown {
		return 0
	}
	return p.UtilPct
}

// withProgress gives each job the progress its training loop reported, if
// any. A job with no process on a GPU this interval is not reported, its
// progress neither: its uid would be unknown.
func withProgress(jobs []wire.JobUsage, prog map[uint32]wire.JobProgress) {
	for i := range jobs {
		if p, ok := prog[jobs[i].JobID]; ok {
			jobs[i].Progress = &p
		}
	}
}

// refusalLogEvery bounds how often an undelivered GPU-use report is logged:
// a controller without a handler for them refuses every one.
const refusalLogEvery = time.Minute

// reportGPUUse measures every interval which job uses which GPU and how
// much, exports it on /metrics and sends it to the controller, best
// effort like telemetry: a lost sample is superseded by the next.
func (a *Agent) reportGPUUse(ctx context.Context) {
	src := a.deps.Processes
	if a.cfg.TelemetryInterval == 0 || src == nil {
		return
	}
	jobOf := a.deps.ProcessJob
	if jobOf == nil {
		jobOf = procjob.GPUProcessJob
	}
	t := time.NewTicker(a.cfg.TelemetryInterval)
	defer t.Stop()
	// When each kind of failure was last logged.
	lastLog := map[string]time.Time{}
	sampleFailing := false
	for {
		procs, err := src.Processes()
		switch {
		case err != nil:
			a.met.gpuUse.set(nil, nil)
			if !sampleFailing {
				a.log.Warn("per-job GPU usage sample failed", keyErr, err)
			}
			sampleFailing = true
		default:
			sampleFailing = false
			now := time.Now()
			jobs, unaccounted, outside := gpuUseOf(procs, jobOf, procjob.MPSServer)
			if a.deps.Progress != nil {
				withProgress(jobs, a.deps.Progress.Progress(now))
			}
			a.met.gpuUse.set(jobs, outside)
			rep := &wire.JobUsageReport{Node: a.cfg.Node, At: now,
				IntervalSec: a.cfg.TelemetryInterval.Seconds(), Jobs: jobs, Unaccounted: unaccounted}
			if _, err := a.sender.Send(ctx, wire.TypeJobUsage, rep); err != nil {
				if ctx.Err() != nil {
					return
				}
				a.met.failures.WithLabelValues(kindGPUUse).Inc()
				msg := "per-job GPU usage not delivered (logged at most once a minute)"
				if errors.Is(err, deliver.ErrRefused) {
					msg = "the controller refused per-job GPU usage (logged at most once a minute)"
				}
				if time.Since(lastLog[msg]) >= refusalLogEvery {
					lastLog[msg] = time.Now()
					a.log.Warn(msg, keyErr, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Metric names of per-job GPU use (labels job, gpu, uuid, as
// dcgm-exporter's HPC job mapping labels its series).
const (
	MetricJobGPUUtil    = "lachesis_agent_job_gpu_utilization_percent"
	MetricJobGPUMemUsed = "lachesis_agent_job_gpu_memory_used_bytes"
	MetricJobGPUSharers = "lachesis_agent_job_gpu_sharers"
	// MetricGPUProcessesOutsideJobs counts, at the last sample, the GPU
	// processes not attributed to any job, by reason.
	MetricGPUProcessesOutsideJobs = "lachesis_agent_gpu_processes_outside_jobs"
)

var (
	gpuUseLabels = []string{"hpc_job", "gpu", "uuid"}
	jobUtilDesc  = prometheus.NewDesc(MetricJobGPUUtil,
		"A Slurm job's utilisation of one GPU at the last sample (its processes' SM utilisation, summed), percent.", gpuUseLabels, nil)
	jobMemDesc = prometheus.NewDesc(MetricJobGPUMemUsed,
		"GPU memory a Slurm job's processes held at the last sample, bytes.", gpuUseLabels, nil)
	jobSharersDesc = prometheus.NewDesc(MetricJobGPUSharers,
		"Jobs with processes on this GPU at the last sample, this one included, plus one where processes of no job use it too.", gpuUseLabels, nil)
	outsideDesc = prometheus.NewDesc(MetricGPUProcessesOutsideJobs,
		"GPU processes at the last sample that belong to no Slurm job, by reason (no_job, gone, other_uid, mps_server).", []string{"reason"}, nil)
)

// gpuUseCollector exports the last sample's per-job GPU use: a job that
// ended has no series at the next sample.
type gpuUseCollector struct {
	mu      sync.Mutex
	jobs    []wire.JobUsage
	outside map[string]int
}

func (u *gpuUseCollector) set(jobs []wire.JobUsage, outside map[string]int) {
	u.mu.Lock()
	u.jobs, u.outside = jobs, outside
	u.mu.Unlock()
}

func (*gpuUseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobUtilDesc, jobMemDesc, jobSharersDesc, outsideDesc} {
		ch <- d
	}
}

func (u *gpuUseCollector) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, j := range u.jobs {
		id := strconv.FormatUint(uint64(j.JobID), 10)
		for _, g := range j.GPUs {
			l := []string{id, strconv.Itoa(g.Index), g.UUID}
			if !g.UtilUnknown { // no series rather than a 0% that means nothing
				ch <- prometheus.MustNewConstMetric(jobUtilDesc, prometheus.GaugeValue, g.UtilPct, l...)
			}
			ch <- prometheus.MustNewConstMetric(jobMemDesc, prometheus.GaugeValue, g.MemUsedMB*(1<<20), l...)
			ch <- prometheus.MustNewConstMetric(jobSharersDesc, prometheus.GaugeValue, float64(g.Sharers), l...)
		}
	}
	for why, n := range u.outside {
		ch <- prometheus.MustNewConstMetric(outsideDesc, prometheus.GaugeValue, float64(n), why)
	}
}
