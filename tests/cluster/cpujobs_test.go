package cluster_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A job without GPUs is charged service in GPU-equivalents: 4 CPUs on a
// node of 8 CPUs and 4 GPUs are 2 GPUs' CPU shares, 2 GPU-s per second.
// It used to keep 0 service and sit in queue 0 for ever, above every GPU
// job that arrived after it; now it is demoted, and a new GPU job waiting
// for its CPUs ranks above it.
func TestLongCPUOnlyJobIsDemotedBelowANewGPUJob(t *testing.T) {
	e := startCluster(t, 1, "tiresias:\n  thresholds: [20, 100000]\n  promote_knob: 0\n")
	cpuJob := e.submit("-J", "cpu", "-c", "4", "--wrap", "sleep 600")
	e.waitState(cpuJob, "RUNNING", 30*time.Second)

	p := e.waitQueue(cpuJob, 1, 40*time.Second)
	if p.Service < 20 {
		t.Fatalf("CPU-only job demoted with %d GPU-s of service (sprio), want >= 20", p.Service)
	}
	if !e.logMatches(fmt.Sprintf(`job without GPUs charged in GPU-equivalents job_id=%d cpus=4 charged_gpus=2`, cpuJob)) {
		t.Fatal("slurmctld's log does not show the CPU-only job's rate (2 GPU-equivalents)")
	}
	r, ok := e.ledgerRecord(cpuJob)
	if !ok || r.RunGPUs != 2 {
		t.Fatalf("ledger record %+v; want its run charged at 2 GPU-equivalents", r)
	}

	// A GPU job that needs the CPUs the CPU-only job holds waits (a
	// CPU-only job is never requeued for GPU work), ranked above it.
	gpuJob := e.submit("-J", "gpu", "--gpus=1", "-c", "8", "--wrap", "sleep 600")
	e.eventually(20*time.Second, "the pass to rank the new GPU job above the CPU-only job", func() (bool, string) {
		pr := e.prio()
		j := e.jobs()
		return j[gpuJob].State == "PENDING" && pr[gpuJob].Queue == 0 && j[gpuJob].Priority > j[cpuJob].Priority,
			fmt.Sprintf("gpu %+v %+v, cpu %+v %+v", j[gpuJob], pr[gpuJob], j[cpuJob], pr[cpuJob])
	})
	if d, err := e.c.ShowJob(cpuJob); err != nil || d.State != "RUNNING" || d.Restarts != 0 {
		t.Fatalf("CPU-only job: %+v, %v; want RUNNING, never requeued", d, err)
	}
}

// Synergy sizes GPU jobs out of what each node has beyond
// synergy.cpu_reserve_per_node and mem_reserve_per_node_mb. The node has 8
// CPUs, 16000 MB and 4 GPUs (DefMemPerCPU 2000). With the reserve, four
// 1-GPU jobs at the share leave room for a CPU-only job; without it, they
// take every CPU and all the memory and the CPU-only job can only wait.
func TestCPUJobBesideSizedGPUJobs(t *testing.T) {
	parallelUnlessAlone(t) // its subtests each start a cluster
	cases := []struct {
		name              string // short: the cluster's directory, and munge's socket path in it, is named after it
		yaml              string
		cpus, memMB       string // the GPU jobs' CpusPerTres and MemPerTres
		noted, cpuJobRuns bool
	}{
		{"reserve lets it start", "synergy:\n  cpu_reserve_per_node: 2\n  mem_reserve_per_node_mb: 4000\n",
			gresTRES("gpu:1"), gresTRES("gpu:3000"), true, true},
		{"none keeps it waiting", "", gresTRES("gpu:2"), gresTRES("gpu:4000"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := startCluster(t, 1, tc.yaml)
			var gpuJobs []uint32
			for i := range 4 {
				id := e.submit("-J", fmt.Sprintf("mystery%d", i), "--gpus=1", "--wrap", "sleep 600")
				gpuJobs = append(gpuJobs, id)
			}
			for _, id := range gpuJobs {
				e.waitState(id, "RUNNING", 30*time.Second)
				d, err := e.c.ShowJob(id)
				if err != nil {
					t.Fatal(err)
				}
				f := d.Fields
				if f["CpusPerTres"] != tc.cpus || f["MemPerTres"] != tc.memMB {
					t.Fatalf("GPU job %d: CpusPerTres=%s MemPerTres=%s; want %s, %s", id, f["CpusPerTres"], f["MemPerTres"], tc.cpus, tc.memMB)
				}
				if noted := strings.Contains(f["AdminComment"], "after keeping 2 CPUs, 4000 MB per node for jobs without GPUs"); noted != tc.noted {
					t.Fatalf("GPU job %d: AdminComment %q; reserve explained = %v, want %v", id, f["AdminComment"], noted, tc.noted)
				}
			}

			cpuJob := e.submit("-J", "cpu", "-c", "1", "--wrap", "sleep 600")
			if tc.cpuJobRuns {
				e.waitState(cpuJob, "RUNNING", 30*time.Second)
				return
			}
			e.eventually(30*time.Second, "Slurm to find no room for the CPU-only job", func() (bool, string) {
				j := e.jobs()[cpuJob]
				return j.State != "PENDING" || j.Reason == "Resources", fmt.Sprintf("%+v", j)
			})
			if j := e.jobs()[cpuJob]; j.State != "PENDING" {
				t.Fatalf("CPU-only job %+v started beside GPU jobs that hold the whole node", j)
			}
		})
	}
}
