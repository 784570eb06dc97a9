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
