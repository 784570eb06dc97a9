package priority

import "testing"

func TestChargedGPUs(t *testing.T) {
	cases := []struct {
		name                   string
		gpus, cpus, cpusPerGPU uint32
		want                   uint32
	}{
		{"a GPU job is charged its GPUs whatever its CPUs", 2, 64, 8, 2},
		{"a CPU-only job of one GPU's CPU share is charged 1", 0, 8, 8, 1},
		{"a CPU-only job of two GPUs' CPU shares is charged 2", 0, 16, 8, 2},
		{"a CPU-only job partly into a second share is charged 2", 0, 9, 8, 2},
		{"a 1-CPU job is charged the minimum of 1", 0, 1, 8, 1},
		{"a CPU-only job with no known CPUs is charged the minimum of 1", 0, 0, 8, 1},
		{"a CPU-only job with no known rate is charged the minimum of 1", 0, 64, 0, 1},
		{"a CPU-only job on a 1-CPU-per-GPU node is charged per CPU", 0, 5, 1, 5},
		{"the largest CPU count stays finite", 0, ^uint32(0), 1, ^uint32(0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ChargedGPUs(c.gpus, c.cpus, c.cpusPerGPU); got != c.want {
				t.Fatalf("ChargedGPUs(%d, %d, %d) = %d, want %d", c.gpus, c.cpus, c.cpusPerGPU, got, c.want)
			}
		})
	}
}
