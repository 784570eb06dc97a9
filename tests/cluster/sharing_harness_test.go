package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// The sharing tests' common parts: a loopback cluster whose node agent
// reads one fake GPU device, fed by the synthetic training job
// (lachesis-synth) that the tests' jobs run.

// startFakeGPUCluster starts a cluster of hw with the node agent on one
// fake GPU device and returns it with the device's directory, which the
// synthetic jobs (of any user) write. The directory is made outside the
// cluster's test dir, in a root any user may enter, and removed when t
// ends. coreYAML and conf are startAgentClusterShaped's; nodeExtra is
// added to the agent's config after the fake GPU.
func startFakeGPUCluster(t *testing.T, hw shape, coreYAML, nodeExtra string, conf func(sock string) []string) (e *agentEnv, fakeDir string) {
	t.Helper()
	fakeRoot, err := os.MkdirTemp("", "lachesis-fakegpu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(fakeRoot) })
	os.Chmod(fakeRoot, 0o755)
	fakeDir = filepath.Join(fakeRoot, "dev")
	e = startAgentClusterShaped(t, hw, "", coreYAML,
		fmt.Sprintf("fake_gpu:\n  dir: %s\n  gpus: 1\n", fakeDir)+nodeExtra, conf)
	return e, fakeDir
}

// sharingPass is the sharing tests' pass interval (tiresiasYAML's
// pass_interval) and the node agent's telemetry_interval: a sharing
// decision comes a few passes after the reports it judges.
const sharingPass = time.Second

// inPasses is a sharing test's deadline of n passes. Every wait polls its
// condition, and n is generous (an idle machine needs a small part of
// it): a loaded machine, whose Slurm, agent and jobs are slower, makes a
// wait longer, never a verdict different (synthCmd's device time).
func inPasses(n int) time.Duration { return time.Duration(n) * sharingPass }

// jobEndAndOpp is the slurm.conf of a sharing test: slurmd reporting job
// ends to the agent (jobEndPlugin), the lines of more, and the
// opportunistic partition.
func jobEndAndOpp(t *testing.T, more ...string) func(sock string) []string {
	return func(sock string) []string {
		return append(append(jobEndPlugin(t)(sock), more...), oppPartition)
	}
}

// synthCmd is the command line of the synthetic training job on the fake
// GPU device at fakeDir: it runs until it is ended (-seconds 0), keeps 4
// MB of data in e.work/data-<name> and holds memMB of the GPU's memory;
// flags are what the test's job adds (speed, model, reports).
//
// It runs in device time (-device-time): its steps, the rate it reports
// and its fake GPU's utilisation are the model's (its knee and loaders,
// its GPU step, its speed beside its neighbours), not what the host's
// CPUs let its loaders compute. So a loaded test machine neither reads as
// a slowdown to introspection nor hides the pair table's, and the
// sharing tests' verdicts are the same on any machine (docs/testing.md).
// The job is still a process on the fake device that the agent reads
// through its telemetry interface and the controller judges.
func (e *agentEnv) synthCmd(fakeDir, name string, memMB int, flags string) string {
	return fmt.Sprintf("%s -device-time -seconds 0 -data %s/data-%s -data-mb 4 -fake-gpu-dir %s -fake-gpu-mem-mb %d %s",
		filepath.Join(e.bin, "lachesis-synth"), e.work, name, fakeDir, memMB, flags)
}

// pairedSynthCmd is synthCmd for a job that runs as model, slowed beside
// its neighbours by the pair table in e.work (writeMysteryPairTable), with
// one loader worker, its progress reported every second and its memory
// taken from e.work/mem-<name> while that file exists. speed is its
// -knee flag: at most 1 (0.25) a GPU-bound job, its GPU busy all the
// time; above (4) an input-bound one, busy a quarter of the time.
func (e *agentEnv) pairedSynthCmd(fakeDir, name, model string, memMB int, speed string) string {
	return e.synthCmd(fakeDir, name, memMB, fmt.Sprintf("%s -workers 1 -report 1s -fake-gpu-mem-file %s/mem-%s -model %s -pair-table %s -pair-gpu v100",
		speed, e.work, name, model, e.work))
}

// writeMysteryPairTable writes into e.work, owned by the test user, the
// progress helper (etc/lachesis_progress.py), relay.py, and the synthetic
// jobs' truth: Gavel's throughputs plus one more model, Mystery, which
// runs ResNet-18/bs64 at half its solo 24.09 it/s.
func writeMysteryPairTable(t *testing.T, e *agentEnv) {
	t.Helper()
	helper, err := os.ReadFile(filepath.Join(repoRoot, "etc", "lachesis_progress.py"))
	if err != nil {
		t.Fatal(err)
	}
	u := testenv.EnsureUser(t, testUser)
	uid, _ := strconv.Atoi(u.Uid)
	files := map[string][]byte{"lachesis_progress.py": helper, "relay.py": []byte(relayPy)}
	for _, name := range []string{"throughputs.csv", "colocated.csv"} {
		if files[name], err = os.ReadFile(filepath.Join(repoRoot, "data", "gavel", name)); err != nil {
			t.Fatal(err)
		}
	}
	files["throughputs.csv"] = append(files["throughputs.csv"], "v100,consolidated,Mystery,0,1,10.0\n"...)
	files["colocated.csv"] = append(files["colocated.csv"], "v100,ResNet-18,64,Mystery,0,12.046616,9.0\n"...)
	for name, body := range files {
		p := filepath.Join(e.work, name)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, -1)
	}
}
