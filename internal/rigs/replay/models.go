package replay

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lachesis-sched/lachesis/internal/rigs/demo"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/sim"
)

// ModelOf is the model job id trains in the sizing replays: the models in
// name order, taken in turn by job id, so both sides and every run of a
// slice give a job the same model.
func ModelOf(id uint32, models map[string]demo.Model) string {
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[int(id%uint32(len(names)))]
}

// maxSpeedSteps bounds a model's speed table.
const maxSpeedSteps = 64

// SimProfiles are the models' throughput tables as the simulator reads them,
// made from the same speed tables scripts/demo-train.sh runs at: speed per
// whole CPUs per GPU (a step function, the sleeper's rule), the same at
// every memory from the profile's best-case memory up, which is all the
// sleeper ignores. The best case the simulator derives from it
// (BestCase at sensitivity.DefaultTolerance) must be the one
// job_submit/synergy is given; Simulate checks it.
func SimProfiles(models map[string]demo.Model) (sensitivity.Profiles, error) {
	out := sensitivity.Profiles{}
	for name, m := range models {
		p := &sensitivity.Profile{Model: name, MemGB: []float64{m.BestMemGB}}
		steps := strings.Split(m.Speeds, ",")
		if len(steps) == 0 || len(steps) > maxSpeedSteps {
			return nil, fmt.Errorf("%w: model %s: %d speed steps (1 to %d)", ErrReplay, name, len(steps), maxSpeedSteps)
		}
		for _, st := range steps {
			c, v, ok := strings.Cut(st, ":")
			cpus, err1 := strconv.Atoi(strings.TrimSpace(c))
			speed, err2 := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if !ok || err1 != nil || err2 != nil || cpus < 1 || !(speed > 0) || speed > 100 ||
				(len(p.CPUs) > 0 && cpus <= p.CPUs[len(p.CPUs)-1]) {
				return nil, fmt.Errorf("%w: model %s: bad speed step %q (ascending cpus:speed)", ErrReplay, name, st)
			}
			p.CPUs = append(p.CPUs, cpus)
			p.Throughput = append(p.Throughput, []float64{speed})
		}
		d, _ := p.BestCase(sensitivity.DefaultTolerance)
		if d.CPUsPerGPU != m.BestCPUs {
			return nil, fmt.Errorf("%w: model %s: its speeds' best case is %d CPUs per GPU, its profile says %d",
				ErrReplay, name, d.CPUsPerGPU, m.BestCPUs)
		}
		out[name] = p
	}
	return out, nil
}

// withModels returns jobs with each job's Model set by ModelOf.
func withModels(jobs []sim.Job, models map[string]demo.Model) []sim.Job {
	out := slices.Clone(jobs)
	for i := range out {
		out[i].Model = ModelOf(out[i].ID, models)
	}
	return out
}
