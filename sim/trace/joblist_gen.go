package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
)

// ErrBadWorkload is wrapped by every error about a workload description.
var ErrBadWorkload = errors.New("bad workload")

// Task classes of the Synergy workload, in the order its model assignment
// breaks ties in.
const (
	TaskImage    = "image"
	TaskLanguage = "language"
	TaskSpeech   = "speech"
)

// SynergyTaskModels are the models each task class draws from, as the
// Synergy simulator's model zoo lists them (msr-fiddle/synergy,
// simulator/jobs/model_zoo.py): five image models, three language models
// and two speech models. bert and vae are in the throughput table but not
// in the workload.
var SynergyTaskModels = []struct {
	Task   string
	Models []string
}{
	{TaskImage, []string{"alexnet", "res18", "res50", "mobilenet", "shufflenet"}},
	{TaskLanguage, []string{"gnmt", "transformer", "lstm"}},
	{TaskSpeech, []string{"m5", "deepspeech"}},
}

// SynergyWorkload describes one of Synergy's synthetic job lists (Mohan et
// al., "Looking Beyond GPUs for DNN Scheduling on Multi-Tenant Clusters",
// OSDI'22, §6, and the rules its simulator implements):
//
//   - Arrivals are a Poisson process of JobsPerHour: exponential
//     inter-arrival times, rounded up to whole seconds.
//   - Durations (at the GPU-proportional share) follow Gavel's rule: with
//     probability 0.8, 10^x minutes with x uniform in [1.5, 3] (32 minutes
//     to 17 hours); otherwise x uniform in [3, 4] (17 hours to 7 days).
//   - GPU demand: one GPU per job, the Synergy simulator's default
//     workload (its runner without --multigpu). With MultiGPU, the mix of
//     its synthetic multi-GPU workload: 1 GPU with probability 0.7, 2 with
//     0.1, 4 with 0.15 and 8 with 0.05.
//   - Models: a deterministic split by task class (Split, in percent,
//     20/70/10 image/language/speech in the paper's main runs): each job
//     goes to the class furthest below its share of the jobs so far (ties
//     to image, then language, then speech), and round-robin among that
//     class's models (SynergyTaskModels).
//
// Job IDs count from 0, as the Synergy simulator's, so its measurement
// window (jobs 4000–4999) names the same jobs.
type SynergyWorkload struct {
	JobsPerHour float64
	// Jobs is how many jobs to generate.
	Jobs int
	// Seed seeds the random draws; the same seed gives the same list, and a
	// longer list with the same seed starts with the shorter one.
	Seed uint64
	// MultiGPU draws GPU demands from the multi-GPU mix instead of giving
	// every job one GPU.
	MultiGPU bool
	// Split is the percentage of image, language and speech jobs; zero
	// means DefaultSynergySplit.
	Split [3]float64
	// Draws picks the random draws: DrawsLachesis (the default, "") or
	// DrawsSynergy.
	Draws string
}

// The random draws a Synergy job list can be made with.
const (
	// DrawsLachesis draws the rules above from Go's PCG stream: a list of
	// the same rate and seed is a different workload from the Synergy
	// simulator's.
	DrawsLachesis = "lachesis"
	// DrawsSynergy makes the very list the Synergy simulator runs for a
	// rate and seed under its default single-GPU workload (runner.py
	// --cluster_job_log, the "Philly-derived" lists of the paper's Fig. 8);
	// see generateSynergyDraws.
	DrawsSynergy = "synergy"
)

// DefaultSynergySplit is the paper's default class split: 20% image, 70%
// language, 10% speech.
var DefaultSynergySplit = [3]float64{20, 70, 10}

// synergyGPUDemand is the GPU-demand mix, cumulative: a uniform draw u
// takes the first entry with u < upTo.
var synergyGPUDemand = []struct {
	upTo float64
	gpus int
}{{0.7, 1}, {0.8, 2}, {0.95, 4}, {1, 8}}

// Duration rule bounds, as exponents of ten in minutes.
const (
	gavelLongProb             = 0.2
	gavelShortLo, gavelShortH = 1.5, 3.0
	gavelLongLo, gavelLongHi  = 3.0, 4.0
)

func (w SynergyWorkload) split() [3]float64 {
	if w.Split == ([3]float64{}) {
		return DefaultSynergySplit
	}
	return w.Split
}

func (w SynergyWorkload) validate() error {
	if !(w.JobsPerHour > 0) || math.IsInf(w.JobsPerHour, 0) {
		return fmt.Errorf("%w: %v jobs per hour, want a finite number > 0", ErrBadWorkload, w.JobsPerHour)
	}
	if w.Jobs <= 0 {
		return fmt.Errorf("%w: %d jobs, want > 0", ErrBadWorkload, w.Jobs)
	}
	var sum float64
	for _, p := range w.split() {
		if !(p >= 0) || math.IsInf(p, 0) {
			return fmt.Errorf("%w: split %v has a share that is not a finite number >= 0", ErrBadWorkload, w.Split)
		}
		sum += p
	}
	if sum <= 0 {
		return fmt.Errorf("%w: split %v sums to 0", ErrBadWorkload, w.Split)
	}
	switch w.Draws {
	case "", DrawsLachesis:
	case DrawsSynergy:
		if w.MultiGPU {
			// Its multi-GPU lists take each job's GPUs from the Philly
			// trace, which is not here.
			return fmt.Errorf("%w: the Synergy simulator's draws have no multi-GPU mix", ErrBadWorkload)
		}
	default:
		return fmt.Errorf("%w: draws %q, want %q or %q", ErrBadWorkload, w.Draws, DrawsLachesis, DrawsSynergy)
	}
	return nil
}

// GenerateSynergyJobs draws a Synergy-style job list. The first job is
// submitted at 0.
func GenerateSynergyJobs(w SynergyWorkload) (*Trace, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	if w.Draws == DrawsSynergy {
		return generateSynergyDraws(w)
	}
	// One stream, drawn in a fixed order per job (arrival, duration, GPUs),
	// so a list is a prefix of any longer list with the same seed. The
	// model sequence draws nothing.
	rng := rand.New(rand.NewPCG(w.Seed, 0x5eed5eed5eed5eed))
	split := w.split()
	var total float64
	for _, p := range split {
		total += p
	}
	var classJobs [3]int
	var nextModel [3]int
	t := &Trace{Name: fmt.Sprintf("synergy-%gjph-seed%d", w.JobsPerHour, w.Seed), Jobs: make([]Job, 0, w.Jobs)}
	var submit float64
	for i := range w.Jobs {
		if i > 0 {
			// Exponential inter-arrival in hours, whole seconds up.
			submit += math.Ceil(rng.ExpFloat64() / w.JobsPerHour * 3600)
		}
		exp := gavelShortLo + rng.Float64()*(gavelShortH-gavelShortLo)
		if rng.Float64() < gavelLongProb {
			exp = gavelLongLo + rng.Float64()*(gavelLongHi-gavelLongLo)
		}
		duration := math.Round(60 * math.Pow(10, exp))
		gpus := 1
		if w.MultiGPU {
			u := rng.Float64()
			for _, d := range synergyGPUDemand {
				if u < d.upTo {
					gpus = d.gpus
					break
				}
			}
		}
		// The class furthest below its target share of the jobs so far.
		best, bestDeficit := 0, math.Inf(-1)
		for c := range split {
			share := 0.0
			if i > 0 {
				share = float64(classJobs[c]) / float64(i)
			}
			if d := split[c]/total - share; d > bestDeficit {
				best, bestDeficit = c, d
			}
		}
		models := SynergyTaskModels[best].Models
		model := models[nextModel[best]%len(models)]
		nextModel[best]++
		classJobs[best]++
		t.Jobs = append(t.Jobs, Job{ID: uint32(i), Submit: submit, GPUs: gpus, Duration: duration, Model: model})
	}
	return t, t.Normalise()
}

// WriteJobList writes a trace as a job list that ReadJobList reads back
// unchanged (submit times in seconds).
func WriteJobList(w io.Writer, t *Trace) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# %s: %d jobs\njob_id,submit_time,gpus,duration,model\n", t.Name, len(t.Jobs))
	for _, j := range t.Jobs {
		fmt.Fprintf(bw, "%d,%s,%d,%s,%s\n", j.ID, strconv.FormatFloat(j.Submit, 'f', -1, 64), j.GPUs, strconv.FormatFloat(j.Duration, 'f', -1, 64), j.Model)
	}
	return bw.Flush()
}

// synergyDurationSeed seeds the durations of the Synergy simulator's
// single-GPU lists whatever the list's seed: its runner loads them from a
// file that ships with it (philly_jobs_sum_attempts_exp_single.pickle),
// drawn once by its Philly parser after random.seed(42), two draws per job
// in turn.
const synergyDurationSeed = 42

// generateSynergyDraws draws a job list as the Synergy simulator
// (msr-fiddle/synergy, simulator/runner.py, jobs/workload.py,
// jobs/model_zoo.py, helpers/utils.py) does for its default single-GPU
// workload, with CPython's generator (pyRandom):
//
//   - Durations come from a fixed stream (synergyDurationSeed), Gavel's
//     rule as above: u = random(); 60·10^uniform(3, 4) seconds if
//     u >= 0.8, else 60·10^uniform(1.5, 3). They do not depend on the
//     list's seed.
//   - The list's seed seeds a second stream. For each job in turn:
//     inter-arrival ceil(-ln(1 - random()) / rate · 3600) seconds after
//     the previous job (the first after 0), then one randint(0, 9) whose
//     value is not used (the model zoo draws it whatever the assignment, so
//     it only advances the stream).
//   - The class is the one with the highest priority, percent/100 minus
//     its share of the jobs so far, ties to image, then language, then
//     speech; priorities start at 0, so the first job is an image job.
//     Within a class, models go round-robin (SynergyTaskModels).
//   - One GPU per job.
//
// The Synergy simulator then runs a job for whole iterations of its
// model's iteration time, int(duration / iteration time) of them, which
// shortens it by less than one iteration (under a second); the list keeps
// the drawn duration. Submit times are shifted so that the first job is
// at 0, as every list here is.
func generateSynergyDraws(w SynergyWorkload) (*Trace, error) {
	durations := newPyRandom(synergyDurationSeed)
	arrivals := newPyRandom(w.Seed)
	split := w.split()
	var priority [3]float64
	var classJobs, nextModel [3]int
	t := &Trace{Name: fmt.Sprintf("synergy-draws-%gjph-seed%d", w.JobsPerHour, w.Seed), Jobs: make([]Job, 0, w.Jobs)}
	var submit float64
	for i := range w.Jobs {
		hours := -math.Log(1.0-arrivals.Random()) / w.JobsPerHour
		submit += math.Ceil(hours * 60 * 60)
		arrivals.RandInt(0, len(SynergyTaskModels[0].Models)+len(SynergyTaskModels[1].Models)+len(SynergyTaskModels[2].Models)-1)

		var exp float64
		if durations.Random() >= 1-gavelLongProb {
			exp = durations.Uniform(gavelLongLo, gavelLongHi)
		} else {
			exp = durations.Uniform(gavelShortLo, gavelShortH)
		}
		duration := 60 * math.Pow(10, exp)

		best := 0
		for c := 1; c < len(priority); c++ {
			if priority[c] > priority[best] {
				best = c
			}
		}
		models := SynergyTaskModels[best].Models
		model := models[nextModel[best]%len(models)]
		nextModel[best]++
		classJobs[best]++
		for c := range priority {
			priority[c] = split[c]/100 - float64(classJobs[c])/float64(i+1)
		}
		t.Jobs = append(t.Jobs, Job{ID: uint32(i), Submit: submit, GPUs: 1, Duration: duration, Model: model})
	}
	return t, t.Normalise()
}
