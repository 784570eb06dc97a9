package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The core runs inside slurmctld: it must not link what measuring (NVML) or
// drawing (image codecs, the plotting library) needs. They reach it only
// through an import mistake such as taking a record type from the profiler
// instead of from package profile, which this catches.
func TestCoreLinksNeitherNVMLNorCharts(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"github.com/NVIDIA/go-nvml", "image/png", "gonum.org/v1/plot", "/internal/chart", "/node-agent/", "lachesis/profiler"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.Contains(dep, f) {
				t.Errorf("liblachesis_core links %s", dep)
			}
		}
	}
}
