package profiler

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/lachesis-sched/lachesis/profile"
)

// Contention handling: a point is measured again, up to pointAttempts
// times in all, when other processes used more than contentionLimit of
// its CPUs' time while more than waitingLimit of the workload's threads
// (on average) queued for a CPU; the least contended attempt is kept.
const (
	contentionLimit = 0.2
	waitingLimit    = 0.1
	pointAttempts   = 3
)

// Profile profiles model: it sweeps the workload of spec over CPU counts
// with its dataset in memory, measures the dataset, the disk and memory
// bandwidth, models throughput against memory, and returns the complete
// profile.Record with the sensitivity matrix and the best-case demand. progress,
// if not nil, is called as the run advances. It logs through
// slog.Default(), including which pinning mechanism this node allowed.
func Profile(ctx context.Context, model string, spec SweepSpec, progress func(Progress)) (profile.Record, error) {
	log := slog.Default().With(logKeyModel, model)
	if model == "" {
		return profile.Record{}, fmt.Errorf("%w: no model name", ErrBadSpec)
	}
	n, err := spec.normalise()
	if err != nil {
		return profile.Record{}, err
	}
	// exec.Command would look the command up on the agent's PATH, as
	// root: look it up on the workload's, as its user.
	env := n.Env
	if env == nil {
		env = os.Environ()
	}
	if n.Argv[0], err = LookPath(n.Argv[0], env, n.Dir, n.Credential); err != nil {
		return profile.Record{}, err
	}
	// Inside a job, the job's process's CPUs; else this process's.
	pid := 0
	if n.Job != nil {
		pid = n.Job.PID
	}
	cpus, err := allowedCPUsOf(pid)
	if err != nil {
		return profile.Record{}, err
	}
	switch {
	case n.MaxCPUs == 0:
		n.MaxCPUs = len(cpus)
	case n.MaxCPUs > len(cpus):
		return profile.Record{}, fmt.Errorf("%w: MaxCPUs %d, but this process may use %d CPUs", ErrBadSpec, n.MaxCPUs, len(cpus))
	}
	cpus = cpus[:n.MaxCPUs]
	counts := candidateCounts(n.MaxCPUs, n.gpus)
	if len(counts) == 0 {
		return profile.Record{}, fmt.Errorf("%w: %d GPUs need a CPU each, %d CPUs to profile on", ErrBadSpec, n.gpus, n.MaxCPUs)
	}
	memTotal, err := memInfo("MemTotal:")
	if err != nil {
		return profile.Record{}, err
	}
	sh := nodeShare(n.MaxCPUs, n.NodeGPUs, memTotal)

	var sig Signal = regexSignal{n.regex}
	if n.UseNVML {
		gpuSig, closeNVML, err := openGPUSignal(n)
		if err != nil {
			return profile.Record{}, err
		}
		defer closeNVML()
		sig = gpuSig
	}
	var pinner Pinner
	if n.Job != nil {
		if pinner, err = jobPinner(*n.Job, cpus); err != nil {
			return profile.Record{}, err
		}
	} else {
		pinner = detectPinner(cpus, log)
	}
	log.Info("profiler: profiling", logKeyMechanism, pinner.Mechanism(), logKeySignal, sig.Name(),
		logKeyCPUs, n.MaxCPUs)

	node, _ := os.Hostname()
	rec := profile.Record{
		ID: newID(), Model: model, Node: node, User: userName(n.Credential), GPUs: n.gpus,
		Started: time.Now(), Signal: sig.Name(), Tolerance: n.Tolerance,
	}
	prog := &progressReporter{fn: progress, start: rec.Started, perPoint: n.PointDuration}
	prog.say(fmt.Sprintf("pinning with %s, throughput from %s", pinner.Mechanism(), sig.Name()))

	var mm memoryModel
	if n.DatasetPath != "" {
		prog.say("measuring the dataset and the disk's read bandwidth")
		// As the user: the agent reads only what they could.
		err = AsUser(n.Credential, func() (err error) {
			mm, err = measureDataset(ctx, n.DatasetPath, log)
			return err
		})
		if err != nil {
			return profile.Record{}, err
		}
		rec.DatasetBytes, rec.DiskBW = int64(mm.datasetBytes), mm.diskBW
	}

	runner := &pointRunner{spec: n, cpus: cpus, pinner: pinner, signal: sig, log: log, inJob: n.Job != nil}
	var results []pointResult
	measure := func(k, point, points int) (profile.Measurement, error) {
		prog.point(point-1, points, 0, 0, "measuring "+profile.NCPUs(k))
		res, err := measurePoint(ctx, runner, k, prog, log)
		if err != nil {
			return profile.Measurement{}, err
		}
		results = append(results, res)
		log.Info("profiler: point", logKeyCPUs, k, logKeyThroughput, res.Throughput,
			logKeyContention, res.contention, logKeyWaiting, res.waiting)
		prog.point(point, points, k, res.Throughput, fmt.Sprintf("%s: %.4g", profile.NCPUs(k), res.Throughput))
		return res.Measurement, nil
	}
	if rec.CPUSweep, err = sweepCPUs(counts, n.Tolerance, []int{sh.cpusPerGPU * n.gpus}, measure); err != nil {
		return profile.Record{}, err
	}

	var footprint int64
	for _, r := range results {
		footprint = max(footprint, r.peakRSS)
	}
	if mm.datasetBytes > 0 {
		prog.say("measuring memory bandwidth")
		if mm.memBW, err = memBW(); err != nil {
			return profile.Record{}, err
		}
		rec.MemBW = mm.memBW
		mm.bytesPerUnit = bytesPerUnit(results)
		if mm.bytesPerUnit == 0 {
			log.Warn("profiler: the workload read nothing measurable while swept (mmap?); modelled as insensitive to memory")
		}
	}
	if rec.Matrix, err = buildMatrix(model, rec.CPUSweep, n.gpus, footprint, mm, sh); err != nil {
		return profile.Record{}, err
	}
	rec.Best, _ = rec.Matrix.BestCase(n.Tolerance)
	rec.Finished = time.Now()
	log.Info("profiler: done", logKeyBest, rec.Best.CPUsPerGPU, logKeyBestMem, rec.Best.MemGBPerGPU)
	prog.done(len(rec.CPUSweep), fmt.Sprintf("best case %s, %.2f GB per GPU", profile.NCPUs(rec.Best.CPUsPerGPU), rec.Best.MemGBPerGPU))
	return rec, nil
}

// measurePoint measures k CPUs, again if other processes disturbed it.
func measurePoint(ctx context.Context, r *pointRunner, k int, prog *progressReporter, log *slog.Logger) (pointResult, error) {
	var best pointResult
	for attempt := 1; attempt <= pointAttempts; attempt++ {
		res, err := r.run(ctx, k)
		if err != nil {
			return res, err
		}
		if attempt == 1 || res.contention < best.contention {
			best = res
		}
		if !res.disturbed() {
			break
		}
		log.Warn("profiler: other processes used the point's CPUs", logKeyCPUs, k,
			logKeyContention, res.contention, logKeyWaiting, res.waiting, logKeyAttempt, attempt)
		prog.say(fmt.Sprintf("%s: %.0f%% of their time went to other processes; measuring again", profile.NCPUs(k), 100*res.contention))
	}
	return best, nil
}

// measureDataset sizes the dataset, times a read of it from disk and
// then reads it into the page cache for the sweep.
func measureDataset(ctx context.Context, path string, log *slog.Logger) (memoryModel, error) {
	files, total, skipped, err := datasetFiles(ctx, path)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return memoryModel{}, err
		case errors.Is(err, fs.ErrPermission):
			return memoryModel{}, fmt.Errorf("%w: %w", ErrNoAccess, err)
		}
		return memoryModel{}, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	if skipped > 0 {
		log.Warn("profiler: dataset entries the user cannot read are left out", logKeyCount, skipped)
	}
	bw, mode, err := diskReadBW(files)
	if err != nil {
		return memoryModel{}, err
	}
	log.Info("profiler: dataset", logKeyBytes, total, logKeyRate, bw, logKeyMode, string(mode))
	cached, err := warmCache(ctx, files, total)
	if err != nil {
		return memoryModel{}, err
	}
	if !cached {
		log.Warn("profiler: dataset larger than half the free memory; the sweep reads it from disk", logKeyBytes, total)
	}
	return memoryModel{datasetBytes: float64(total), diskBW: bw}, nil
}

// bytesPerUnit is the median, over the points where it was measured, of
// the bytes the workload read per unit of throughput.
func bytesPerUnit(results []pointResult) float64 {
	var vs []float64
	for _, r := range results {
		if r.readRate > 0 && r.Throughput > 0 {
			vs = append(vs, r.readRate/r.Throughput)
		}
	}
	if len(vs) == 0 {
		return 0
	}
	return median(vs)
}
