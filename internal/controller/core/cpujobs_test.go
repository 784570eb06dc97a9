package core

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lachesis-sched/lachesis/internal/controller/config"
	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
)

// cpuOnly is a running job without GPUs: cpus CPUs on a node of nodeCPUs
// CPUs and nodeGPUs GPUs.
func cpuOnly(id, cpus, nodeCPUs, nodeGPUs uint32, submit, start int64) Snapshot {
	s := running(id, 0, submit, start)
	s.CPUs, s.NodeCPUs, s.NodeGPUs = cpus, nodeCPUs, nodeGPUs
	return s
}

func TestJobsWithoutGPUsAreChargedInGPUEquivalents(t *testing.T) {
	cases := []struct {
		name    string
		rate    uint32 // tiresias.cpu_job_cpus_per_gpu
		snap    Snapshot
		service float64 // after 40 s
	}{
		{"a job of two GPUs' CPU share on a 2-CPUs-per-GPU node is charged 2 GPUs", 0, cpuOnly(1, 4, 8, 4, 1000, 1010), 80},
		{"a 1-CPU job is charged the minimum of 1 GPU", 0, cpuOnly(1, 1, 8, 4, 1000, 1010), 40},
		{"a job on a node without GPUs is charged 1 GPU", 0, cpuOnly(1, 32, 32, 0, 1000, 1010), 40},
		{"the configured rate wins over the node's shape", 8, cpuOnly(1, 32, 8, 4, 1000, 1010), 160},
		{"the configured rate prices a node without GPUs", 8, cpuOnly(1, 32, 32, 0, 1000, 1010), 160},
		{"a GPU job is charged its GPUs, not its CPUs", 0, func() Snapshot {
			s := cpuOnly(1, 8, 8, 4, 1000, 1010)
			s.GPUs = 1
			return s
		}(), 40},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "l.db")
			cfg := testConfig(db)
			cfg.CPUJobCPUsPerGPU = tc.rate
			c := openCoreWith(t, cfg)
			defer c.Close()
			if d := pass(c, 1050, tc.snap); d[0].Service != tc.service {
				t.Fatalf("service = %v, want %v", d[0].Service, tc.service)
			}
		})
	}
}

// The case: a long CPU-only job used to sit in queue 0 for ever,
// above demoted GPU work and above new GPU jobs' equals. Now it gains
// service, is demoted, and a newly arrived GPU job ranks above it.
func TestLongCPUOnlyJobIsDemotedBelowANewGPUJob(t *testing.T) {
	c := openCore(t, filepath.Join(t.TempDir(), "l.db"))
	defer c.Close()
	cpu := cpuOnly(1, 2, 8, 4, 1000, 1000)
	pass(c, 1050, cpu)
	d := pass(c, 1101, cpu, pending(2, 1, 1100)) // 101 GPU-s: past the first threshold (100)
	if d[0].Queue != 1 || d[0].Service != 101 {
		t.Fatalf("CPU-only job: queue %d, service %v; want queue 1 with 101 GPU-s", d[0].Queue, d[0].Service)
	}
	if d[1].Queue != 0 || d[1].Priority <= d[0].Priority {
		t.Fatalf("new GPU job: queue %d priority %d; want queue 0 above the CPU-only job's %d", d[1].Queue, d[1].Priority, d[0].Priority)
	}
	// Still never a preemptor or a victim of GPU work (preempt.go).
	if c.Preemptable(2, 1) {
		t.Fatal("a GPU job may requeue a CPU-only job; want never")
	}
}

// A run's rate is fixed when it opens: the ledger and the SystemComment
// marker carry it, so a restart that loses the ledger, or a snapshot that
// lacks the node's shape, charges the run at the same rate as before.
func TestCPUOnlyRunKeepsItsRateAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	c := openCore(t, filepath.Join(dir, "a.db"))
	cpu := cpuOnly(1, 4, 8, 4, 1000, 1010)
	d := pass(c, 1050, cpu)
	if d[0].Service != 80 || !strings.Contains(d[0].Marker, " rg=2") {
		t.Fatalf("service %v, marker %q; want 80 GPU-s and a run rate of 2 in the marker", d[0].Service, d[0].Marker)
	}
	if r, ok := c.Record(1); !ok || r.RunGPUs != 2 {
		t.Fatalf("ledger record %+v; want the run charged at 2 GPUs", r)
	}
	c.Close()

	// A new controller with an empty ledger; Slurm kept the marker, and
	// this snapshot does not know the node (it would charge 1).
	c2 := openCore(t, filepath.Join(dir, "b.db"))
	defer c2.Close()
	cpu.Marker = d[0].Marker
	cpu.NodeCPUs, cpu.NodeGPUs = 0, 0
	if d := pass(c2, 1110, cpu); d[0].Service != 200 {
		t.Fatalf("service after restart = %v, want 200 (2 GPU-equivalents × 100 s)", d[0].Service)
	}
}

func openCoreWith(t *testing.T, cfg config.Config) *Core {
	t.Helper()
	store, err := ledger.Open(cfg.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
