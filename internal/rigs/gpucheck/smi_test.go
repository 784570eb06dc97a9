package gpucheck

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseComputeApps(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      []App
		err       string
	}{
		{"two processes are read", "4242, 2566, GPU-a, /b/lachesis-gpuload\n4243, 6662, GPU-a, /b/lachesis-gpuload\n",
			[]App{{PID: 4242, UUID: "GPU-a", Name: "/b/lachesis-gpuload", MemMiB: 2566, MemKnown: true},
				{PID: 4243, UUID: "GPU-a", Name: "/b/lachesis-gpuload", MemMiB: 6662, MemKnown: true}}, ""},
		{"memory the driver cannot tell is unknown, not zero", "77, [N/A], GPU-a, nvidia-cuda-mps-server\n",
			[]App{{PID: 77, UUID: "GPU-a", Name: "nvidia-cuda-mps-server"}}, ""},
		{"a comma in the process name stays in the name", "5, 10, GPU-a, /opt/a,b/train\n",
			[]App{{PID: 5, UUID: "GPU-a", Name: "/opt/a,b/train", MemMiB: 10, MemKnown: true}}, ""},
		{"no process is an empty list", "\n", nil, ""},
		{"the no-process sentence is an empty list", "No running processes found\n", nil, ""},
		{"a line with too few fields is refused", "4242, 2566\n", nil, "want pid"},
		{"a pid that is no number is refused", "x, 1, GPU-a, p\n", nil, "pid"},
		{"a negative memory is refused", "5, -3, GPU-a, p\n", nil, "used_memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseComputeApps(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// pmonR5xx is pmon -s um as recent drivers print it (jpg, ofa and ccpm
// columns); pmonOld as older ones did.
const pmonR5xx = `# gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   ccpm    command 
# Idx           #    C/G      %      %      %      %      %      %     MB     MB    name 
    0       4242     C     61      2      -      -      -      -   2566      0    lachesis-gpuload
    0       4243     C      -      -      -      -      -      -   6662      0    lachesis-gpuload
    0       4242     C     59      2      -      -      -      -   2566      0    lachesis-gpuload
    0       4243     C     24      0      -      -      -      -   6662      0    lachesis-gpuload
`

const pmonOld = `# gpu        pid  type    sm   mem   enc   dec    fb   command
# Idx          #   C/G     %     %     %     %    MB   name
    0          -     -     -     -     -     -     -   -
    1       4242     C    30     1     0     0   300   my train
`

func TestParsePmon(t *testing.T) {
	got, err := ParsePmon(pmonR5xx)
	if err != nil {
		t.Fatal(err)
	}
	want := []PmonSample{
		{GPU: 0, PID: 4242, Type: "C", SM: 61, SMKnown: true, FBMiB: 2566, FBKnown: true, Command: "lachesis-gpuload"},
		{GPU: 0, PID: 4243, Type: "C", FBMiB: 6662, FBKnown: true, Command: "lachesis-gpuload"},
		{GPU: 0, PID: 4242, Type: "C", SM: 59, SMKnown: true, FBMiB: 2566, FBKnown: true, Command: "lachesis-gpuload"},
		{GPU: 0, PID: 4243, Type: "C", SM: 24, SMKnown: true, FBMiB: 6662, FBKnown: true, Command: "lachesis-gpuload"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recent driver's pmon:\ngot  %+v\nwant %+v", got, want)
	}
	if mean, known, total := PmonMean(got, 4243); mean != 24 || known != 1 || total != 2 {
		t.Fatalf("PmonMean(4243) = %v, %d of %d; want 24 over 1 of 2 (a '-' second is no sample)", mean, known, total)
	}
	got, err = ParsePmon(pmonOld)
	if err != nil {
		t.Fatal(err)
	}
	want = []PmonSample{{GPU: 1, PID: 4242, Type: "C", SM: 30, SMKnown: true, FBMiB: 300, FBKnown: true, Command: "my train"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("older driver's pmon (an idle GPU's '-' line skipped):\ngot  %+v\nwant %+v", got, want)
	}
}

func TestParsePmonRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct{ name, out, err string }{
		{"data before the header is refused", "    0   4242   C   61\n", "before the header"},
		{"a pid that is no number is refused", "# gpu pid type sm\n 0 abc C 5\n", "pid"},
		{"an sm that is no number is refused", "# gpu pid type sm\n 0 12 C lots\n", "sm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParsePmon(tc.out); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one naming %q", err, tc.err)
			}
		})
	}
}

func TestParseGPUs(t *testing.T) {
	got, err := ParseGPUs("0, GPU-a, 81559, 9321, 84, 580.159.04, NVIDIA H100 80GB HBM3\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []GPUInfo{{Index: 0, UUID: "GPU-a", MemTotalMiB: 81559, MemUsedMiB: 9321, UtilPct: 84, UtilKnown: true,
		DriverVersion: "580.159.04", Name: "NVIDIA H100 80GB HBM3"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	got, err = ParseGPUs("0, GPU-a, 81559, 9321, [N/A], 580.159.04, X\n")
	if err != nil || got[0].UtilKnown {
		t.Fatalf("an [N/A] utilisation: got %+v, %v; want it unknown", got, err)
	}
	if _, err := ParseGPUs("0, GPU-a, lots, 9321, 1, d, X\n"); err == nil || !strings.Contains(err.Error(), "memory.total") {
		t.Fatalf("err = %v, want memory.total named", err)
	}
}
