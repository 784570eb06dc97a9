package agent

import "testing"

func TestChooseGPUType(t *testing.T) {
	cases := []struct {
		name, nvml, gres, want string
	}{
		{"NVML name matched to the node's GRES type", "NVIDIA A100-SXM4-40GB", "gpu:a100:4(S:0-1)", "a100"},
		{"NVML name matched among several GRES types", "Tesla V100-PCIE-16GB", "gpu:a100:2,gpu:v100:2", "v100"},
		{"NVML name without a matching GRES type is used as Slurm writes it", "NVIDIA H100 80GB HBM3", "gpu:4", "nvidia_h100_80gb_hbm3"},
		{"no NVML: the node's only GRES type", "", "gpu:b:2(S:0),shard:8", "b"},
		{"no NVML and two GRES types: untyped", "", "gpu:a:1,gpu:b:1", ""},
		{"no NVML and untyped GRES: untyped", "", "gpu:2", ""},
		{"nothing known: untyped", "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := chooseGPUType(slurmDeviceName(tc.nvml), gresGPUTypes(tc.gres)); got != tc.want {
				t.Fatalf("chooseGPUType(%q, %q) = %q, want %q", tc.nvml, tc.gres, got, tc.want)
			}
		})
	}
}
