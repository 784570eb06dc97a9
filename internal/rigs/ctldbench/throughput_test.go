package ctldbench

import (
	"slices"
	"strings"
	"testing"
)

func TestSizedWorkloadAsksForTheShareOnlyForGPUJobsWithoutOne(t *testing.T) {
	for _, tc := range []struct {
		name       string
		i          int
		wantCPUs   string // "" = no --cpus-per-gpu at all
		wantMemArg bool
	}{
		{"gpu job without a request gets the share", 0, "--cpus-per-gpu=2", true},
		{"per-node gpu job gets the share", 5, "--cpus-per-gpu=2", true},
		{"cpu-only job is unchanged", 1, "", false},
		{"explicit request is kept as the user's", 7, "--cpus-per-gpu=2", true},
		{"gpu job without a model key gets the share", 9, "--cpus-per-gpu=2", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := SizedWorkload(tc.i)
			var cpus []string
			mem := false
			for _, a := range got {
				if strings.HasPrefix(a, "--cpus-per-gpu") {
					cpus = append(cpus, a)
				}
				mem = mem || strings.HasPrefix(a, "--mem-per-gpu")
			}
			if tc.wantCPUs == "" {
				if !slices.Equal(got, MixedWorkload(tc.i)) {
					t.Errorf("SizedWorkload(%d) = %q, want MixedWorkload's %q", tc.i, got, MixedWorkload(tc.i))
				}
				return
			}
			if len(cpus) != 1 || cpus[0] != tc.wantCPUs {
				t.Errorf("--cpus-per-gpu args %q, want exactly %q", cpus, tc.wantCPUs)
			}
			if mem != tc.wantMemArg {
				t.Errorf("--mem-per-gpu present: %v, want %v", mem, tc.wantMemArg)
			}
		})
	}
}

func TestSelectSetupsKeepsTheNamedInTheirOrder(t *testing.T) {
	all := []Setup{{Label: "plain"}, {Label: "tiresias"}, {Label: "synergy"}}
	labels := func(s []Setup) string {
		var l []string
		for _, x := range s {
			l = append(l, x.Label)
		}
		return strings.Join(l, ",")
	}
	for only, want := range map[string]string{"": "plain,tiresias,synergy", "synergy, plain": "plain,synergy", "none": ""} {
		if got := labels(SelectSetups(all, only)); got != want {
			t.Errorf("SelectSetups(%q) = %q, want %q", only, got, want)
		}
	}
}
