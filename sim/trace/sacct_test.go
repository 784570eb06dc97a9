package trace

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func readSacctFile(t *testing.T, path string, fold SacctFold) (*Trace, SacctStats) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, st, err := ReadSacct(f, SacctOptions{Fold: fold})
	if err != nil {
		t.Fatal(err)
	}
	return tr, st
}

// The sample (testdata/sacct_sample.txt) has: steps; a job requeued once
// (1002) and one after a node failure (1009); a CPU-only job; a pending,
// a running and a never-started job; typed GPUs; a comment naming the model
// with other words and with a '|' in it; an elapsed time over a day.
func TestReadSacct_FoldsRequeuedRunsAndLeavesOutWhatCannotBeReplayed(t *testing.T) {
	tr, st := readSacctFile(t, "testdata/sacct_sample.txt", FoldLast)
	wantStats := SacctStats{Lines: 14, Steps: 3, Jobs: 5, Requeued: 2, NoGPU: 1, Unfinished: 2, NeverRan: 1}
	st.FirstSubmit = wantStats.FirstSubmit
	if st != wantStats {
		t.Fatalf("stats %+v, want %+v", st, wantStats)
	}
	// Times relative to the first submission, 1007's at 07:00.
	want := []Job{
		{ID: 1007, Submit: 0, GPUs: 8, Duration: 26 * 3600, Model: "gnmt"},
		{ID: 1001, Submit: 3600, GPUs: 1, Duration: 3600, Model: "res18"},
		{ID: 1002, Submit: 4200, GPUs: 2, Duration: 7200, Model: "bert-ft"},
		{ID: 1009, Submit: 7200, GPUs: 4, Duration: 3600, Model: "flaky-node"},
		{ID: 1010, Submit: 9000, GPUs: 1, Duration: 330, Model: "lstm"},
	}
	if len(tr.Jobs) != len(want) {
		t.Fatalf("got %d jobs: %+v", len(tr.Jobs), tr.Jobs)
	}
	for i := range want {
		if tr.Jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, tr.Jobs[i], want[i])
		}
	}
}

func TestReadSacct_FoldSumAddsEveryRun(t *testing.T) {
	tr, _ := readSacctFile(t, "testdata/sacct_sample.txt", FoldSum)
	for _, j := range tr.Jobs {
		want := map[uint32]float64{1002: 1800 + 7200, 1009: 1200 + 3600}[j.ID]
		if want != 0 && j.Duration != want {
			t.Errorf("job %d: duration %v, want %v", j.ID, j.Duration, want)
		}
	}
}

func TestReadSacct_HeaderLineAllowsAnyColumnOrder(t *testing.T) {
	tr, st := readSacctFile(t, "testdata/sacct_header.txt", FoldLast)
	if st.Jobs != 2 || tr.Jobs[0].Model != "res18" || tr.Jobs[1].Model != "alexnet" || tr.Jobs[1].GPUs != 2 || tr.Jobs[1].Submit != 300 {
		t.Fatalf("got %+v (%+v)", tr.Jobs, st)
	}
}

func TestReadSacct_RejectsBadInput(t *testing.T) {
	cases := map[string]string{
		"too few fields":     "1|a|2024-05-01T00:00:00|x\n",
		"bad elapsed":        "1|a|2024-05-01T00:00:00|||1h|gres/gpu=1|COMPLETED|\n",
		"bad submit":         "1|a|yesterday|||00:01:00|gres/gpu=1|COMPLETED|\n",
		"bad gpu count":      "1|a|2024-05-01T00:00:00|||00:01:00|gres/gpu=two|COMPLETED|\n",
		"nothing replayable": "1|a|2024-05-01T00:00:00|||00:01:00|cpu=1|COMPLETED|\n",
		"header lacks field": "JobIDRaw|JobName\n1|a\n",
		"bad fold":           "",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			fold := FoldLast
			if name == "bad fold" {
				fold = "median"
			}
			if _, _, err := ReadSacct(strings.NewReader(in), SacctOptions{Fold: fold}); !errors.Is(err, ErrBadTrace) {
				t.Fatalf("err = %v, want ErrBadTrace", err)
			}
		})
	}
}

func TestParseElapsed(t *testing.T) {
	cases := map[string]float64{
		"05:30":       330,
		"01:00:00":    3600,
		"1-02:00:00":  93600,
		"00:00:00":    0,
		"10-00:00:01": 864001,
	}
	for in, want := range cases {
		if got, err := parseElapsed(in); err != nil || got != want {
			t.Errorf("parseElapsed(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1h", "1:2:3:4", "x-01:00:00", "-01:00"} {
		if _, err := parseElapsed(bad); err == nil {
			t.Errorf("parseElapsed(%q) accepted", bad)
		}
	}
}

func TestTresGPUs(t *testing.T) {
	cases := map[string]int{
		"billing=8,cpu=8,gres/gpu=2,mem=64G,node=1": 2,
		"cpu=8,gres/gpu:a100=2,gres/gpu:v100=1":     3,
		"cpu=8,gres/gpu:a100=2,gres/gpu=2":          2,
		"cpu=2,mem=4G":                              0,
		"":                                          0,
		"cpu=4,gres/gpumem=40G,gres/gpu=1,gres/gpuutil=50": 1,
	}
	for in, want := range cases {
		if got, err := tresGPUs(in); err != nil || got != want {
			t.Errorf("tresGPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

// LoadSacct reads a file as ReadSacct reads its text, and names the trace
// after the file.
func TestLoadSacctNamesTheTraceAfterItsFile(t *testing.T) {
	want, wantStats := readSacctFile(t, "testdata/sacct_sample.txt", FoldLast)
	tr, st, err := LoadSacct("testdata/sacct_sample.txt", SacctOptions{Fold: FoldLast})
	if err != nil || st != wantStats || tr.Name != "sacct_sample.txt" || len(tr.Jobs) != len(want.Jobs) {
		t.Fatalf("got %q, %d jobs, %+v, %v", tr.Name, len(tr.Jobs), st, err)
	}
	if _, _, err := LoadSacct("testdata/none.txt", SacctOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}
