package cluster_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// The plugins built for the other supported release, put in slurmctld's
// PluginDir: slurmctld refuses them with a line that says why and stops,
// before any of Lachesis's code runs (init() is never called), and nothing
// crashes. Slurm checks plugin_version (SLURM_VERSION_NUMBER, to the micro
// version) after dlopen: a 22.05 plugin in 24.11's slurmctld is
// "Incompatible Slurm plugin ... version (22.05.8)" (and a 24.11 plugin
// built on Debian 12 in 22.05's); a 24.11 plugin built on Debian 13 does
// not even load into Debian 12's slurmctld, its glibc being newer
// ("dlopen(...): ... version `GLIBC_2.38' not found"). make test builds
// both releases' trees before it runs either suite.
func TestPluginsBuiltForTheOtherReleaseAreRefused(t *testing.T) {
	parallelUnlessAlone(t)
	other := otherRelease(t)
	plugins := filepath.Join(repoRoot, "build", "slurm-"+other, "plugins")
	if _, err := os.Stat(filepath.Join(plugins, "priority_tiresias.so")); err != nil {
		t.Fatalf("the plugins for Slurm %s are not built in %s (make test builds them; alone: scripts/release-root.sh run make build): %v", other, plugins, err)
	}
	dir := filepath.Join(testDirRoot, "OtherRelease")
	os.RemoveAll(dir)
	fragment, _ := os.ReadFile(filepath.Join(repoRoot, "etc", "slurm.conf.lachesis"))
	c, err := slurmcluster.Up(t.Context(), repoRoot, slurmcluster.Options{
		Dir: dir, Nodes: 1, GPUsPerNode: 4, PortBase: reservePortBlock(t),
		PluginDir:    plugins,
		LachesisYAML: tiresiasYAML(dir, ""),
		ExtraConf:    string(fragment),
	})
	t.Cleanup(func() {
		if c != nil {
			c.Down() //nolint:errcheck
		}
	})
	if err == nil {
		t.Fatalf("slurmctld %s started with the plugins built for Slurm %s", slurmRelease, other)
	}
	log := c.ControllerLog()
	so := `\S+/slurm-` + regexp.QuoteMeta(other) + `/plugins/\w+\.so`
	why := `Incompatible Slurm plugin ` + so + ` version \(` + regexp.QuoteMeta(other) + `\.\d+\)|dlopen\(` + so + `\): .*GLIBC_`
	if !regexp.MustCompile(why).MatchString(log) || !strings.Contains(log, "fatal: failed to initialize") {
		t.Fatalf("slurmctld's log does not say why it refused the other release's plugin (want %q and a fatal stop):\n%s", why, tail(log, 15))
	}
	// Nothing of Lachesis's ran and nothing crashed.
	for _, bad := range []string{"lachesis core ready", "Segmentation fault", "SIGSEGV", "core dumped", "loaded (built for Slurm"} {
		if strings.Contains(log, bad) {
			t.Fatalf("slurmctld's log has %q:\n%s", bad, tail(log, 15))
		}
	}
}
