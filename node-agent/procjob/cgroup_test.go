package procjob

import (
	"slices"
	"testing"
)

func TestJobOfCgroupPath(t *testing.T) {
	for path, want := range map[string]uint32{
		"/slurm_lnode1/uid_1001/job_77/step_0/task_0":                 77,
		"/system.slice/slurmstepd.scope/job_5/step_batch/user/task_0": 5,
		"/user.slice/user-1001.slice/session-3.scope":                 0,
		"/":                        0,
		"/job_x/step_0":            0,
		"/job_0":                   0,
		"/job_99999999999/step_0":  0, // beyond uint32
		"/lachesis-profile-job_12": 0,
	} {
		if got := JobOfCgroupPath(path); got != want {
			t.Errorf("JobOfCgroupPath(%q) = %d, want %d", path, got, want)
		}
	}
}

func TestParseCgroups(t *testing.T) {
	got := ParseCgroups("12:memory:/slurm/uid_5/job_7/step_0\n4:cpu,cpuacct:/\n1:name=systemd:/init.scope\n0::/x/job_7\nbad line\n")
	if len(got) != 4 || !got[3].V2() || got[0].V2() || got[1].Controllers[1] != "cpuacct" || got[0].Path != "/slurm/uid_5/job_7/step_0" {
		t.Fatalf("parsed %+v", got)
	}
}

func TestJobsOfCgroupsAreDistinctInOrder(t *testing.T) {
	cgs := ParseCgroups("12:memory:/slurm/uid_5/job_7/step_0\n4:cpuset:/slurm/uid_5/job_7/step_0\n0::/user.slice/job_9\n3:freezer:/\n")
	if got := JobsOfCgroups(cgs); !slices.Equal(got, []uint32{7, 9}) {
		t.Fatalf("got %v", got)
	}
	if got := JobsOfCgroups(nil); got != nil {
		t.Fatalf("no cgroups: got %v", got)
	}
}

// Which job_<id> cgroup is the authority: the first on a hierarchy's
// path whose directory root owns, where the hierarchy is mounted (a
// subtree mount included); a user's own job_<id> (delegated v2, or below
// their step) is not.
func TestRootJobOfCgroups(t *testing.T) {
	mounts := parseMountinfo(`31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
40 31 0:37 /ct /sys/fs/cgroup/my\040systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate
`)
	if len(mounts) != 4 || mounts[2].dir != "/sys/fs/cgroup/my systemd" || mounts[2].root != "/ct" {
		t.Fatalf("mounts: %+v", mounts)
	}
	users := map[string]uint32{
		"/sys/fs/cgroup/freezer/slurm/uid_1000/job_5/step_0/job_9":                              1000,
		"/sys/fs/cgroup/unified/user.slice/user-1000.slice/user@1000.service/job_7":             1000,
		"/sys/fs/cgroup/unified/system.slice/slurmstepd.scope/job_8/step_0/user/job_6":          1000,
		"/sys/fs/cgroup/unified/user.slice/user-1000.slice/user@1000.service/app.slice/x/job_3": 1000,
	}
	owner := func(path string) (uint32, bool) { return users[path], true }
	for _, tc := range []struct {
		name  string
		text  string
		job   uint32
		whole bool
	}{
		{"v1, Slurm's layout", "7:freezer:/slurm/uid_1000/job_5/step_0\n", 5, true},
		{"v1, a user's job_ below their step", "7:freezer:/slurm/uid_1000/job_5/step_0/job_9\n", 5, true},
		{"v1, two controllers", "3:cpu,cpuacct:/slurm/uid_1000/job_5/step_batch\n", 5, true},
		{"v1, a hierarchy not mounted", "9:memory:/slurm/uid_1000/job_5/step_0\n", 0, true},
		{"v1, a subtree mount", "4:name=systemd:/ct/slurm/job_4\n", 4, true},
		{"v1, outside the subtree mount", "4:name=systemd:/other/job_4\n", 0, true},
		{"v2, Slurm's layout", "0::/system.slice/slurmstepd.scope/job_8/step_0/user/task_0\n", 8, true},
		{"v2, a user's own job_ (delegated)", "0::/user.slice/user-1000.slice/user@1000.service/job_7\n", 0, true},
		{"v2, a user's own job_ deeper", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x/job_3\n", 0, true},
		{"root's cgroups naming two jobs", "7:freezer:/slurm/uid_1000/job_5/step_0\n0::/system.slice/slurmstepd.scope/job_8/step_0\n", 0, false},
		{"no job", "7:freezer:/\n0::/init.scope\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, whole := rootJobOfCgroups(ParseCgroups(tc.text), mounts, owner)
			if job != tc.job || whole != tc.whole {
				t.Fatalf("got %d, %v; want %d, %v", job, whole, tc.job, tc.whole)
			}
		})
	}
}
