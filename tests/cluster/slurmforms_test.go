package cluster_test

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
