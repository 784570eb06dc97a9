package sim

import (
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// ModelRule says how jobs get a model for the Synergy allocation.
type ModelRule string

const (
	// ModelsAssign gives every job that names no model one drawn from the
	// profile table: model number splitmix64(seed ⊕ job ID) mod M among
	// the M profiled models in name order. A job's draw depends only on
	// the seed and its own ID, so it is the same whatever slice of the
	// trace is simulated. A job that names a model keeps it; a name not in
	// the table makes the job unprofiled.
	ModelsAssign ModelRule = "assign"
	// ModelsAsGiven keeps the trace's model names; jobs without one, or
	// with a name not in the table, are unprofiled.
	ModelsAsGiven ModelRule = "given"
)

// Unprofiled jobs get the GPU-proportional share and run at the trace's
// speed (1.0): nothing says they would gain from more, as in the plugin.

// splitmix64 is a fixed, well-mixed hash (Steele et al.'s SplitMix64
// finaliser), chosen so that the model rule is reproducible from its
// description alone.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// modelFor resolves a job's profile under the rule; nil means unprofiled.
func modelFor(job *Job, rule ModelRule, profiles sensitivity.Profiles, names []string, seed uint64) (string, *sensitivity.Profile) {
	name := job.Model
	if name == "" && rule == ModelsAssign && len(names) > 0 {
		name = names[splitmix64(seed^uint64(job.ID))%uint64(len(names))]
	}
	return name, profiles[name]
}
