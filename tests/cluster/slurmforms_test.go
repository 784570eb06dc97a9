package cluster_test

import "testing"

// What Slurm prints differs between releases; the tests compare what they
// read with these, so each difference is written once.

// gresTRES is a gres entry ("gpu:2", "shard:4") of a job's TRES strings
// (CpusPerTres, MemPerTres, TresPerNode, ...) as the Slurm under test
// prints it: "gres:gpu:2" up to 22.05, "gres/gpu:2" from 23.02. The
// plugins write the same form (slurmctld-hook/slurm_compat.h,
// LACHESIS_GRES_PREFIX).
func gresTRES(entry string) string {
	if releaseBefore(slurmRelease, "23.02") {
		return "gres:" + entry
	}
	return "gres/" + entry
}

// otherRelease is the supported Slurm release beside the one under test.
func otherRelease(t *testing.T) string {
	t.Helper()
	switch slurmRelease {
	case "22.05":
		return "24.11"
	case "24.11":
		return "22.05"
	}
	t.Fatalf("Slurm %s is not a supported release (22.05, 24.11)", slurmRelease)
	return ""
}
