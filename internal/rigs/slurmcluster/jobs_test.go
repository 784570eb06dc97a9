package slurmcluster

import "testing"

// The two releases print a job's allocated TRES under different names;
// JobDetail.AllocTRES reads either (the lines are cut from each release's
// `scontrol show job` of a running 2-GPU job with slurmdbd).
func TestJobDetailReadsTheAllocatedTRESOfEitherRelease(t *testing.T) {
	for _, tc := range []struct{ release, out string }{
		{"22.05", "JobId=7 JobName=two\n   JobState=RUNNING Reason=None Dependency=(null)\n" +
			"   TRES=cpu=1,mem=2000M,node=1,billing=1,gres/gpu=2\n   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*\n"},
		{"24.11", "JobId=7 JobName=two\n   JobState=RUNNING Reason=None Dependency=(null)\n" +
			"   ReqTRES=cpu=1,mem=2000M,node=1,billing=1,gres/gpu=2\n" +
			"   AllocTRES=cpu=1,mem=2000M,node=1,billing=1,gres/gpu=2\n   Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=*\n"},
	} {
		d := jobDetail(tc.out)
		if d.AllocTRES != "cpu=1,mem=2000M,node=1,billing=1,gres/gpu=2" || d.State != "RUNNING" {
			t.Errorf("Slurm %s: AllocTRES %q, state %q", tc.release, d.AllocTRES, d.State)
		}
	}
}
