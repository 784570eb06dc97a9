package cluster_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

// The packages `make deb` builds into the build tree's deb/ (make test-cluster does).
var debPackages = []string{"lachesis-slurmctld", "lachesis-node-agent"}

// TestDebPackages installs both packages with dpkg,
// runs a loopback cluster whose PluginDir is Slurm's own directory only (so
// every Lachesis plugin comes from the package), runs the commands from
// /usr, then removes and purges the packages and checks nothing is left.
// It changes the machine's /usr and /etc; the packages are purged at the
// end even when it fails.
// jobendStack enables lachesis_jobend on a node with the package installed.
const jobendStack = "/etc/slurm/plugstack.conf.d/lachesis-jobend.conf"

func TestDebPackages(t *testing.T) {
	runsAlone(t, "it installs packages system-wide: Slurm's PluginDir and /etc/slurm/plugstack.conf.d, which every cluster reads")
	// runsAlone keeps the other tests of this binary away; this lock keeps
	// another test binary on the machine (another checkout's make test)
	// from installing or purging the same packages at once. A release root
	// has its own dpkg, but the lock is machine-wide (/run/lachesis-test)
	// and cheap, so it is taken there too.
	unlock, err := testenv.Lock("deb-packages")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	debs := builtDebs(t)
	pluginDir := slurmPluginDir(t)
	guardInstall(t)

	args := []string{"-i"}
	for _, p := range debPackages {
		args = append(args, debs[p])
	}
	if out, err := dpkg(t, args...); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	for _, p := range debPackages {
		if st := pkgStatus(p); st != "installed" {
			t.Fatalf("%s: status %q after dpkg -i, want installed", p, st)
		}
	}

	owned := map[string][]string{}
	for _, p := range debPackages {
		owned[p] = ownedFiles(t, p)
	}
	conffiles := map[string]bool{}
	for _, p := range debPackages {
		for _, c := range pkgConffiles(t, p) {
			conffiles[c] = true
		}
	}

	for _, tc := range []struct {
		name, pkg, path, sameAs string
		conffile                bool
	}{
		{"core library is in Slurm's PluginDir", "lachesis-slurmctld", pluginDir + "/liblachesis_core.so", "", false},
		{"priority/tiresias is in Slurm's PluginDir", "lachesis-slurmctld", pluginDir + "/priority_tiresias.so", "", false},
		{"preempt/tiresias is in Slurm's PluginDir", "lachesis-slurmctld", pluginDir + "/preempt_tiresias.so", "", false},
		{"job_submit/synergy is in Slurm's PluginDir", "lachesis-slurmctld", pluginDir + "/job_submit_synergy.so", "", false},
		{"lachesis.yaml is a conffile next to slurm.conf", "lachesis-slurmctld", "/etc/slurm/lachesis.yaml", "etc/lachesis.yaml", true},
		{"slurm.conf fragment is in the docs", "lachesis-slurmctld", "/usr/share/doc/lachesis-slurmctld/slurm.conf.lachesis", "etc/slurm.conf.lachesis", false},
		{"the pair table's seeds are where sharing.pair_table looks by default", "lachesis-slurmctld", "/usr/share/lachesis/gavel/colocated.csv", "data/gavel/colocated.csv", false},
		{"the pair table's solo throughputs ship beside them", "lachesis-slurmctld", "/usr/share/lachesis/gavel/throughputs.csv", "data/gavel/throughputs.csv", false},
		{"the manual the README links to ships beside it", "lachesis-slurmctld", "/usr/share/doc/lachesis-slurmctld/docs/install.md.gz", "", false},
		{"the agent's package ships the manual too", "lachesis-node-agent", "/usr/share/doc/lachesis-node-agent/docs/profiling.md.gz", "", false},
		{"node agent is in /usr/sbin", "lachesis-node-agent", "/usr/sbin/lachesis-node-agent", "", false},
		{"profiler is in /usr/bin", "lachesis-node-agent", "/usr/bin/lachesis-profiler", "", false},
		{"systemd unit is in /lib/systemd/system", "lachesis-node-agent", "/lib/systemd/system/lachesis-node-agent.service", "etc/lachesis-node-agent.service", false},
		{"node-agent.yaml is a conffile", "lachesis-node-agent", "/etc/lachesis/node-agent.yaml", "etc/node-agent.yaml", true},
		{"SPANK plugin lachesis_jobend is in Slurm's PluginDir", "lachesis-node-agent", pluginDir + "/lachesis_jobend.so", "", false},
		{"SPANK plugin is enabled through plugstack.conf.d as a conffile", "lachesis-node-agent", jobendStack, "", true},
		{"progress helper for training loops is shipped for PYTHONPATH", "lachesis-node-agent", "/usr/share/lachesis/python/lachesis_progress.py", "etc/lachesis_progress.py", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(owned[tc.pkg], tc.path) {
				t.Fatalf("%s does not own %s", tc.pkg, tc.path)
			}
			if conffiles[tc.path] != tc.conffile {
				t.Fatalf("%s: conffile %v, want %v", tc.path, conffiles[tc.path], tc.conffile)
			}
			got, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.sameAs != "" {
				want, err := os.ReadFile(filepath.Join(repoRoot, tc.sameAs))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("installed %s differs from %s", tc.path, tc.sameAs)
				}
			}
		})
	}

	t.Run("commands run from /usr", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			argv  []string
			codes []int // accepted exit codes
			want  string
		}{
			{"profiler help lists the commands", []string{"/usr/bin/lachesis-profiler", "-h"}, []int{0}, "lachesis-profiler profile"},
			// The agent's flag package exits 2 after -h.
			{"agent help lists its flags", []string{"/usr/sbin/lachesis-node-agent", "-h"}, []int{0, 2}, "-config"},
			{"agent accepts the shipped configuration", []string{"/usr/sbin/lachesis-node-agent", "-config", "/etc/lachesis/node-agent.yaml", "-check"}, []int{0}, "valid"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, err := exec.Command(tc.argv[0], tc.argv[1:]...).CombinedOutput()
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(tc.codes, code) || !strings.Contains(string(out), tc.want) {
					t.Fatalf("%s: exit %d (want one of %v), output lacks %q:\n%s",
						strings.Join(tc.argv, " "), code, tc.codes, tc.want, out)
				}
			})
		}
	})

	// A short name: the cluster directory holds munged's socket.
	t.Run("cluster", func(t *testing.T) {
		// The system's plugstack.conf, as a compute node's slurmd would
		// read it (a test cluster's default is the one beside its own
		// slurm.conf).
		e := startShapedCluster(t, shape{Nodes: 1, GPUs: 4, SystemPlugins: true},
			"tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n", "PlugStackConfig=/etc/slurm/plugstack.conf")
		pid, err := e.c.ControllerPID()
		if err != nil {
			t.Fatal(err)
		}
		maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, so := range []string{"liblachesis_core.so", "priority_tiresias.so", "preempt_tiresias.so", "job_submit_synergy.so"} {
			if !bytes.Contains(maps, []byte(" "+pluginDir+"/"+so+"\n")) {
				t.Errorf("slurmctld has not mapped %s/%s", pluginDir, so)
			}
		}
		if bytes.Contains(maps, []byte(filepath.Join(repoRoot, "build")+"/")) {
			t.Errorf("slurmctld mapped a library from a build tree under %s/build", repoRoot)
		}

		// slurmstepd loads the packaged SPANK plugin through Debian's
		// plugstack.conf.d include: no agent runs here, so at the batch
		// script's end it says in slurmd's log that it could not tell
		// one, and the job completes all the same.
		short := e.submit("-J", "deb-end", "--output=/dev/null", "--wrap", "true")
		line := fmt.Sprintf("lachesis_jobend: job %d: could not tell the node agent", short)
		e.eventually(60*time.Second, "lachesis_jobend's line in slurmd's log", func() (bool, string) {
			logs, _ := filepath.Glob(filepath.Join(e.dir, "log", "slurmd-*.log"))
			for _, l := range logs {
				if b, err := os.ReadFile(l); err == nil && bytes.Contains(b, []byte(line)) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("no %q in %v", line, logs)
		})

		// sprio shows Tiresias's factors: 4 GPUs × 5 s crosses 20 GPU-s
		// and moves the job from queue 0 to queue 1.
		id := e.submit("-J", "deb", "--gpus=4", "--wrap", "sleep 600")
		e.waitState(id, "RUNNING", 30*time.Second)
		p := e.waitQueue(id, 1, 40*time.Second)
		if p.Service < 20 {
			t.Fatalf("queue 1 with %d GPU-s of attained service, want >= 20", p.Service)
		}
	})

	// dpkg -r keeps the conffiles and removes everything else...
	if out, err := dpkg(t, "-r", debPackages[0], debPackages[1]); err != nil {
		t.Fatalf("dpkg -r: %v\n%s", err, out)
	}
	for _, p := range debPackages {
		if st := pkgStatus(p); st != "config-files" {
			t.Errorf("%s: status %q after dpkg -r, want config-files", p, st)
		}
		for _, f := range owned[p] {
			_, err := os.Lstat(f)
			switch {
			case conffiles[f] && err != nil:
				t.Errorf("dpkg -r removed the conffile %s: %v", f, err)
			case !conffiles[f] && !errors.Is(err, fs.ErrNotExist):
				t.Errorf("%s is still there after dpkg -r (%v)", f, err)
			}
		}
	}
	// ...and --purge the conffiles and the systemd helper's state.
	if out, err := dpkg(t, "--purge", debPackages[0], debPackages[1]); err != nil {
		t.Fatalf("dpkg --purge: %v\n%s", err, out)
	}
	for _, p := range debPackages {
		if st := pkgStatus(p); st != "not-installed" {
			t.Errorf("%s: status %q after dpkg --purge, want not-installed", p, st)
		}
	}
	for f := range conffiles {
		if _, err := os.Lstat(f); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("conffile %s is still there after dpkg --purge (%v)", f, err)
		}
	}
	for _, d := range []string{"/etc/lachesis", "/var/lib/lachesis"} {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there after dpkg --purge (%v)", d, err)
		}
	}
	filepath.WalkDir("/var/lib/systemd", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), "lachesis-node-agent") {
			t.Errorf("systemd helper state %s is still there after dpkg --purge", path)
		}
		return nil
	})
}

// builtDebs finds the build tree's one package of each name (deb/ beside
// plugins/) and checks it was built from the current plugins.
func builtDebs(t *testing.T) map[string]string {
	t.Helper()
	dir := filepath.Join(buildTree, "deb")
	core, err := os.Stat(filepath.Join(buildTree, "plugins", "liblachesis_core.so"))
	if err != nil {
		t.Fatal(err)
	}
	debs := map[string]string{}
	for _, p := range debPackages {
		m, _ := filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		if len(m) != 1 {
			t.Fatalf("want one %s_*.deb in %s, found %d: run `make deb` (make test-cluster does)", p, dir, len(m))
		}
		st, err := os.Stat(m[0])
		if err != nil {
			t.Fatal(err)
		}
		if st.ModTime().Before(core.ModTime()) {
			t.Fatalf("%s is older than %s/plugins: run `make deb`", m[0], buildTree)
		}
		debs[p] = m[0]
	}
	return debs
}

// slurmPluginDir is Slurm's own PluginDir, found as scripts/cluster.sh
// finds it: where the Debian package put priority_basic.so.
func slurmPluginDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("dpkg", "-L", "slurm-wlm-basic-plugins").Output()
	if err != nil {
		t.Fatalf("dpkg -L slurm-wlm-basic-plugins: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasSuffix(l, "/priority_basic.so") {
			return filepath.Dir(l)
		}
	}
	t.Fatal("slurm-wlm-basic-plugins has no priority_basic.so")
	return ""
}

// guardInstall refuses to touch packages this test did not install (an
// admin's), and purges what a previous run of it left behind when it died
// before its cleanup: a marker file records that the test installed them.
// The packages are purged when the test ends, whatever its outcome.
func guardInstall(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(testDirRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(testDirRoot, ".debs-installed")
	purge := func() error {
		if out, err := dpkg(t, "--purge", debPackages[0], debPackages[1]); err != nil {
			return fmt.Errorf("dpkg --purge: %v\n%s", err, out)
		}
		return os.Remove(marker)
	}
	if _, err := os.Stat(marker); err == nil {
		if err := purge(); err != nil {
			t.Fatalf("purging a previous run's packages: %v", err)
		}
	}
	for _, p := range debPackages {
		if st := pkgStatus(p); st != "not-installed" {
			t.Fatalf("%s is already on this machine (%s); this test installs and purges it, "+
				"so it runs only where the package is absent", p, st)
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := purge(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// dpkg runs dpkg, waiting while another dpkg or apt holds its lock (other
// test runs and package installs share the machine).
func dpkg(t *testing.T, args ...string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cmd := exec.Command("dpkg", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "lock") || time.Now().After(deadline) {
			return string(out), err
		}
		time.Sleep(2 * time.Second)
	}
}

// pkgStatus is dpkg's status of a package: installed, config-files,
// not-installed, ...
func pkgStatus(p string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", p).Output()
	if err != nil || len(out) == 0 {
		return "not-installed"
	}
	return strings.TrimSpace(string(out))
}

// ownedFiles lists the regular files (not directories) dpkg installed for p.
func ownedFiles(t *testing.T, p string) []string {
	t.Helper()
	out, err := exec.Command("dpkg", "-L", p).Output()
	if err != nil {
		t.Fatalf("dpkg -L %s: %v", p, err)
	}
	var files []string
	for _, l := range strings.Split(string(out), "\n") {
		// Stat, not Lstat: /lib is a symbolic link to usr/lib on merged-/usr
		// systems, and dpkg lists it as a directory.
		if st, err := os.Stat(l); l != "" && err == nil && !st.IsDir() {
			files = append(files, l)
		}
	}
	if len(files) == 0 {
		t.Fatalf("dpkg -L %s lists no files", p)
	}
	return files
}

func pkgConffiles(t *testing.T, p string) []string {
	t.Helper()
	out, err := exec.Command("dpkg-query", "-W", "-f=${Conffiles}", p).Output()
	if err != nil {
		t.Fatalf("dpkg-query conffiles of %s: %v", p, err)
	}
	var files []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			files = append(files, f[0])
		}
	}
	return files
}
