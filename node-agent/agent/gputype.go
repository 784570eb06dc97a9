package agent

import (
	"context"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/slurmcmd"
)

// Profiles are recorded with the type of the GPUs they ran on, so the
// controller can compare a model's throughput across types (issue 12).
// The type must be the one Slurm names in the node's typed GRES, since
// that is what the controller sees on a running job. In order:
//
//  1. gpu_type in the agent's config, when the admin set it;
//  2. NVML's device name, written as Slurm's AutoDetect=nvml writes it
//     (lower case, spaces as '_'): the node's GRES type that is a
//     substring of it when there is one (Slurm matches a configured type
//     to a detected name that way: gres.conf Type=a100 matches
//     "nvidia_a100-sxm4-40gb"), else the name itself;
//  3. without NVML (fake GPUs in tests, a driver-less node), the node's
//     GRES type when it has exactly one;
//  4. "" (untyped) otherwise.

// gresTimeout bounds the scontrol call that reads the node's GRES.
const gresTimeout = 5 * time.Second

// gpuType resolves the type profiles taken now are recorded with.
func (a *Agent) gpuType() string {
	if a.cfg.GPUType != "" {
		return a.cfg.GPUType
	}
	var name string
	if a.deps.Telemetry != nil {
		if gpus, err := a.deps.Telemetry.Sample(); err == nil && len(gpus) > 0 {
			name = slurmDeviceName(gpus[0].Name)
		}
	}
	var types []string
	if a.deps.NodeGres != nil {
		g, err := a.deps.NodeGres()
		if err != nil {
			a.log.Warn("could not read this node's GRES for the GPU type of profiles", keyNode, a.cfg.Node, keyErr, err)
		}
		types = gresGPUTypes(g)
	}
	return chooseGPUType(name, types)
}

// chooseGPUType is steps 2 to 4 above.
func chooseGPUType(nvmlName string, gresTypes []string) string {
	if nvmlName != "" {
		for _, t := range gresTypes {
			if strings.Contains(nvmlName, t) {
				return t
			}
		}
		return nvmlName
	}
	if len(gresTypes) == 1 {
		return gresTypes[0]
	}
	return ""
}

// slurmDeviceName writes an NVML device name as Slurm's AutoDetect=nvml
// does (gpu_common_underscorify_tolower), bounded to a type's length.
func slurmDeviceName(name string) string {
	s := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), " ", "_")
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// gresGPUTypes reads the GPU types of a node's GRES string as scontrol
// prints it ("gpu:a100:4(S:0-1),gpu:v100:2,shard:8"), lower case and
// without duplicates; untyped GPUs ("gpu:4") have none.
func gresGPUTypes(gres string) []string {
	var out []string
	for _, e := range strings.Split(gres, ",") {
		e, _, _ = strings.Cut(strings.TrimSpace(e), "(")
		p := strings.Split(e, ":")
		if len(p) < 3 || p[0] != "gpu" || p[1] == "" {
			continue
		}
		t := strings.ToLower(p[1])
		dup := false
		for _, o := range out {
			dup = dup || o == t
		}
		if !dup {
			out = append(out, t)
		}
	}
	return out
}

// ScontrolGres returns a Deps.NodeGres that asks slurmctld, through
// scontrol, for node's configured GRES.
func ScontrolGres(node string) func() (string, error) {
	return func() (string, error) {
		return slurmcmd.Runner{Timeout: gresTimeout}.NodeGres(context.Background(), node)
	}
}
