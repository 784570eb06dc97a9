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
}

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
	return nil
}

// GenerateSynergyJobs draws a Synergy-style job list. The first job is
// submitted at 0.
func GenerateSynergyJobs(w SynergyWorkload) (*Trace, error) {
	if err := w.validate(); err != nil {
		return nil, err
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
