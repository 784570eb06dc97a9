package profiler

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// availablePinners are the real mechanisms this machine lets the test
// process use; affinity always works.
func availablePinners(t *testing.T, cpus []int) []Pinner {
	out := []Pinner{affinityPinner{}}
	for _, find := range []func() (Pinner, error){
		func() (Pinner, error) { return findCgroupV2(ctlCpuset, cpus) },
		func() (Pinner, error) { return findCgroupV1Cpuset(cpus) },
		func() (Pinner, error) { return findCgroupV2(ctlCPU, cpus) },
	} {
		if p, err := find(); err == nil {
			out = append(out, p)
		} else {
			t.Logf("not available here: %v", err)
		}
	}
	return out
}

// Each mechanism available here really confines a real child: the child
// sees only the point's CPUs from its first instruction, sits in the
// point's cgroup, and the profiler's own threads are left as they were.
func TestPinners_ConfineARealChildToThePointsCPUs(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	before := threadAffinities(t)
	for _, p := range availablePinners(t, cpus) {
		t.Run(p.Mechanism(), func(t *testing.T) {
			point := cpus[:1]
			var out bytes.Buffer
			cmd := exec.Command("/bin/cat", "/proc/self/status", "/proc/self/cgroup")
			cmd.Stdout = &out
			conf, err := p.Start(cmd, point)
			if err != nil {
				t.Fatal(err)
			}
			waitErr := cmd.Wait()
			if err := conf.Release(); err != nil {
				t.Errorf("release: %v", err)
			}
			if waitErr != nil {
				t.Fatal(waitErr)
			}
			if got := statusField(out.String(), "Cpus_allowed_list:"); got != cpuList(point) {
				t.Errorf("child may run on %q, want %q", got, cpuList(point))
			}
			inCgroup := strings.Contains(out.String(), "lachesis-profile-")
			if _, isCgroup := p.(*cgroupPinner); isCgroup != inCgroup {
				t.Errorf("child in a lachesis-profile cgroup: %v, want %v:\n%s", inCgroup, isCgroup, out.String())
			}
			if cg, ok := p.(*cgroupPinner); ok {
				left, _ := filepath.Glob(filepath.Join(cg.parent, fmt.Sprintf("lachesis-profile-%d-*", os.Getpid())))
				if len(left) > 0 {
					t.Errorf("cgroups left behind: %v", left)
				}
				// No weight is raised: the point's cgroup has the default.
				for _, f := range []string{"cpu.weight", "cpu.shares"} {
					if _, err := os.Stat(filepath.Join(cg.parent, f)); err == nil && regexp.MustCompile(`(?m)^[0-9]+:[^:]*\bcpu\b[^:]*:/.*lachesis-profile-`).MatchString(out.String()) {
						t.Errorf("child in a cpu cgroup of the profiler's:\n%s", out.String())
					}
				}
			}
		})
	}
	if after := threadAffinities(t); !slices.Equal(before, after) {
		t.Errorf("the test process's thread affinities changed from %v to %v", before, after)
	}
}

func TestDetectPinner_NamesTheMechanismUsedHere(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	p := detectPinner(cpus, slog.Default())
	t.Logf("pinning mechanism on this machine: %s", p.Mechanism())
	if p.Mechanism() == "" {
		t.Fatal("no mechanism name")
	}
}

func TestOrderByCore_FirstThreadOfEveryCoreComesFirst(t *testing.T) {
	// Two packages of two cores with two threads each, numbered the way
	// Linux usually numbers them: siblings n and n+4.
	topo := func(cpu int) (topology, bool) {
		return topology{pkg: (cpu % 4) / 2, core: cpu % 2}, true
	}
	cases := []struct {
		name string
		cpus []int
		topo func(int) (topology, bool)
		want []int
	}{
		{"hyperthreads after all cores", []int{0, 1, 2, 3, 4, 5, 6, 7}, topo, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"a restricted set keeps the rule", []int{7, 0, 4, 1}, topo, []int{0, 1, 7, 4}},
		{"siblings numbered adjacently are spread", []int{0, 1, 2, 3},
			func(cpu int) (topology, bool) { return topology{core: cpu / 2}, true }, []int{0, 2, 1, 3}},
		{"unknown topology: each CPU is a core", []int{3, 1, 2},
			func(int) (topology, bool) { return topology{}, false }, []int{1, 2, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := orderByCore(c.cpus, c.topo); !slices.Equal(got, c.want) {
				t.Fatalf("order %v, want %v", got, c.want)
			}
		})
	}
}

func statusField(status, key string) string {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// threadAffinities are the CPU lists of this process's threads, sorted.
func threadAffinities(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // thread gone
		}
		out = append(out, statusField(string(b), "Cpus_allowed_list:"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The v2 path starts the child straight into its cgroup with
// clone3(CLONE_INTO_CGROUP). Where a v2 hierarchy is mounted but offers no
// cpuset or cpu controller (a hybrid v1 host), the move itself can still
// be checked in a cgroup without controllers.
func TestStartIntoCgroupV2_ChildStartsInTheCgroup(t *testing.T) {
	own, mnt, err := ownCgroup("")
	if err != nil {
		t.Skipf("no cgroup v2 hierarchy: %v", err)
	}
	dir := filepath.Join(own, "lachesis-profile-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a v2 cgroup here: %v", err)
	}
	conf := &cgroupConfinement{dirs: []string{dir}}
	defer conf.Release()
	var out bytes.Buffer
	cmd := exec.Command("/bin/cat", "/proc/self/cgroup")
	cmd.Stdout = &out
	if err := startIntoCgroupV2(cmd, dir, []int{0}); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(mnt.point, dir)
	if want := "0::/" + rel; !strings.Contains(out.String(), want) {
		t.Fatalf("child's cgroups:\n%s\nwant a line %q", out.String(), want)
	}
	if err := conf.Release(); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveStale_RemovesOnlyCgroupsOfDeadProfilers(t *testing.T) {
	parent := t.TempDir() // stands in for a cgroup directory: plain dirs rmdir the same way
	dead := filepath.Join(parent, "lachesis-profile-999999999-1")
	alive := filepath.Join(parent, fmt.Sprintf("lachesis-profile-%d-1", os.Getpid()))
	other := filepath.Join(parent, "lachesis-profile-unrelated")
	for _, d := range []string{dead, alive, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeStale(parent)
	for d, want := range map[string]bool{dead: false, alive: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}
