package demo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// The bundled workload parses, and with sharing on it leaves room: its
// guaranteed jobs ask for fewer GPUs than sharing off gives them.
func TestSharingWorkloadShipped(t *testing.T) {
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "etc", "demo", "sharing-workload.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, err := ParseSharingWorkload(f, 4)
	if err != nil {
		t.Fatal(err)
	}
	var off, on float64
	opp := 0
	for _, j := range jobs {
		off += ShareAlloc(j, false)
		on += ShareAlloc(j, true)
		if j.Opportunistic {
			opp++
		}
	}
	if !(on < off) || opp == 0 || opp == len(jobs) {
		t.Fatalf("%d jobs, %d opportunistic, %.1f GPUs with sharing on, %.1f off", len(jobs), opp, on, off)
	}
}

func TestParseSharingWorkload(t *testing.T) {
	jobs, err := ParseSharingWorkload(strings.NewReader(
		"name,arrival_s,gpus,work_s,class,util_pct\n# c\ng,0,1,50,guaranteed,90\no,4.5,0.25,25,opportunistic,60\n"), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{Name: "g", GPUs: 1, Work: 50 * time.Second, UtilPct: 90},
		{Name: "o", Arrival: 4500 * time.Millisecond, GPUs: 1, Work: 25 * time.Second, Share: 0.25, Opportunistic: true, UtilPct: 60},
	}
	if !slices.Equal(jobs, want) {
		t.Fatalf("got %+v\nwant %+v", jobs, want)
	}
	for _, bad := range []string{
		"g,0,2,50,guaranteed,90",       // more than one GPU
		"g,0,0.3,50,guaranteed,90",     // not a number of shards
		"g,0,0,50,guaranteed,90",       // no GPU
		"g,0,1,50,best-effort,90",      // unknown class
		"g,0,1,50,guaranteed,0",        // no utilisation
		"g,0,1,50,guaranteed,101",      // more than the GPU
		"g,0,1,NaN,guaranteed,90",      // not a duration
		"g,0,1,1e9,guaranteed,90",      // far beyond a demo
		"g,0,1,50,guaranteed",          // a field short
		"g,-1,1,50,guaranteed,90",      // before the start
		",0,1,50,guaranteed,90",        // no name
		"g,0,1,50,guaranteed,90,extra", // a field too many
	} {
		if _, err := ParseSharingWorkload(strings.NewReader(bad+"\n"), 4); !errors.Is(err, ErrWorkload) {
			t.Errorf("%q: %v, want ErrWorkload", bad, err)
		}
	}
	if _, err := ParseSharingWorkload(strings.NewReader("# nothing\n"), 4); !errors.Is(err, ErrWorkload) {
		t.Errorf("an empty workload: %v", err)
	}
}

// Sharing off: whole GPUs, one partition. On: shards (whole GPUs as all
// their shards) and the opportunistic partition for that class.
func TestShareRequest(t *testing.T) {
	g := Job{Name: "g", GPUs: 1}
	half := Job{Name: "h", GPUs: 1, Share: 0.5}
	opp := Job{Name: "o", GPUs: 1, Share: 0.5, Opportunistic: true}
	for _, c := range []struct {
		j       Job
		sharing bool
		want    []string
	}{
		{g, false, []string{"--gpus=1"}},
		{half, false, []string{"--gpus=1"}},
		{opp, false, []string{"--gpus=1"}},
		{g, true, []string{"--gres=shard:4"}},
		{half, true, []string{"--gres=shard:2"}},
		{opp, true, []string{"--gres=shard:2", "-p", "opp"}},
	} {
		if got := ShareRequest(c.j, c.sharing, 4); !slices.Equal(got, c.want) {
			t.Errorf("%s sharing=%v: %q, want %q", c.j.Name, c.sharing, got, c.want)
		}
	}
}

// The job keeps its GPU busy util_pct of the time alone (knee 100/util)
// and does work_s seconds of steps.
func TestSynthCommand(t *testing.T) {
	cmd := SynthCommand(Job{Name: "o", Work: 25 * time.Second, UtilPct: 40}, "/b/lachesis-synth", "/f", "/d", "/c/o")
	for _, want := range []string{"exec /b/lachesis-synth ", " -io-wait ", " -workers 1 ", " -knee 2.5 ", " -steps 625 ",
		" -checkpoint /c/o ", " -data /d/o ", " -fake-gpu-dir /f ", " -shared-speed 0.7"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("%q lacks %q", cmd, want)
		}
	}
}

func TestSumJobGPUUtil(t *testing.T) {
	text := `# HELP lachesis_agent_job_gpu_utilization_percent x
# TYPE lachesis_agent_job_gpu_utilization_percent gauge
lachesis_agent_job_gpu_utilization_percent{gpu="0",hpc_job="7",uuid="GPU-fake-lnode1-0"} 35.5
lachesis_agent_job_gpu_utilization_percent{gpu="0",hpc_job="8",uuid="GPU-fake-lnode1-0"} 60
lachesis_agent_gpu_utilization_percent{gpu="0",uuid="GPU-fake-lnode1-0"} 95.5
lachesis_agent_job_gpu_utilization_percent_other 99
`
	got, err := SumJobGPUUtil(strings.NewReader(text))
	if err != nil || got != 95.5 {
		t.Fatalf("got %v, %v; want 95.5", got, err)
	}
	for _, bad := range []string{
		`lachesis_agent_job_gpu_utilization_percent{gpu="0"} 1e9`,
		`lachesis_agent_job_gpu_utilization_percent{gpu="0"} x`,
		`lachesis_agent_job_gpu_utilization_percent{gpu="0"} -1`,
	} {
		if _, err := SumJobGPUUtil(strings.NewReader(bad + "\n")); err == nil {
			t.Errorf("%q was summed", bad)
		}
	}
}

func TestSummarizeAndReportSharing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	out := []Outcome{
		{Job: Job{Name: "g1", Work: 96 * time.Second, UtilPct: 50}, Submit: at(0), End: at(40)},
		{Job: Job{Name: "g2"}, Submit: at(10), End: at(30), Restarts: 1},
		{Job: Job{Name: "o1", Opportunistic: true}, Submit: at(0), End: at(60), Restarts: 2},
		{Job: Job{Name: "o2", Opportunistic: true}, Submit: at(20), End: at(120)},
	}
	samples := []ShareSample{{Alloc: 4, Busy: 2}, {Alloc: 2, Busy: 1}}
	s := SummarizeSharing("on", out, samples, 4)
	want := ShareSummary{Label: "on", Alloc: 0.75, Busy: 0.375, Useful: 0.1, Guaranteed: 30 * time.Second,
		Opportunistic: 80 * time.Second, OppPerMin: 1, Makespan: 120 * time.Second, GuarRequeues: 1, OppRequeues: 2}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if z := SummarizeSharing("none", nil, nil, 4); z != (ShareSummary{Label: "none"}) {
		t.Fatalf("nothing run: %+v", z)
	}

	var b bytes.Buffer
	off := want
	off.Label, off.Busy, off.Guaranteed = "off", 0.5, 20*time.Second
	ReportSharing(&b, off, s)
	text := b.String()
	for _, line := range []string{
		"GPUs busy, measured by the node agent    |          50% |          38% | x0.75",
		"guaranteed jobs' average JCT             |       20.0 s |       30.0 s | x1.50",
		"requeues (guaranteed/opportunistic)      |          1/2 |          1/2 |",
		"useful GPU work (work x util alone)      |          10% |          10% | x1.00",
		"Sharing cost the guaranteed jobs 50% of their JCT here",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("report lacks %q:\n%s", line, text)
		}
	}
	// No help at all: said so.
	b.Reset()
	same := off
	same.Label = "on"
	ReportSharing(&b, off, same)
	if !strings.Contains(b.String(), "Sharing did not help on this workload") {
		t.Errorf("a run where sharing changed nothing does not say so:\n%s", b.String())
	}
}

// The per-job table shows a job's share of a GPU where it has one.
func TestReportShowsShares(t *testing.T) {
	at := time.Unix(1000, 0)
	out := []Outcome{
		{Job: Job{Name: "half", GPUs: 1, Share: 0.5, Work: 10 * time.Second}, Submit: at, End: at.Add(12 * time.Second)},
		{Job: Job{Name: "whole", GPUs: 2, Work: 10 * time.Second}, Submit: at, End: at.Add(11 * time.Second)},
	}
	var b bytes.Buffer
	Report(&b, "off", out, "on", out, false)
	for _, line := range []string{"half      -          0.5    10s |", "whole     -            2    10s |"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, b.String())
		}
	}
}
