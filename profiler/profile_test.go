package profiler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/chart"
	"github.com/lachesis-sched/lachesis/profile"
)

// The acceptance tests profile the real synthetic job (cmd/lachesis-synth,
// built here with go build) pinned with the real mechanism this machine
// offers. Each sweep point runs 2 s.
const synthPoint = 2 * time.Second

var (
	synthOnce sync.Once
	synthBin  string
	synthErr  error
	synthDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if synthDir != "" {
		os.RemoveAll(synthDir)
	}
	os.Exit(code)
}

// synthBinary builds lachesis-synth once per test binary.
func synthBinary(t *testing.T) string {
	t.Helper()
	synthOnce.Do(func() {
		if synthDir, synthErr = os.MkdirTemp("", "lachesis-synth-test-"); synthErr != nil {
			return
		}
		synthBin = filepath.Join(synthDir, "lachesis-synth")
		out, err := exec.Command("go", "build", "-o", synthBin, "github.com/lachesis-sched/lachesis/cmd/lachesis-synth").CombinedOutput()
		if err != nil {
			synthErr = fmt.Errorf("go build lachesis-synth: %w\n%s", err, out)
		}
	})
	if synthErr != nil {
		t.Fatal(synthErr)
	}
	return synthBin
}

// synthSpec profiles the synthetic job with its knee at knee cores on at
// most maxCPUs CPUs. It runs at a raised priority where the test may
// raise it (as root): under `make test` other packages' tests share the
// CPUs, and the knee must not move because a neighbour was busy. The
// pinning is untouched by that. (nice runs the command anyway, at normal
// priority, where it may not.)
func synthSpec(t *testing.T, knee string, maxCPUs int) SweepSpec {
	data := filepath.Join(t.TempDir(), "dataset")
	return SweepSpec{
		Argv: []string{"nice", "-n", "-20", synthBinary(t), "-knee", knee, "-data", data, "-data-mb", "16",
			"-report", "250ms", "-seconds", "60"},
		PointDuration: synthPoint,
		MaxCPUs:       maxCPUs,
		DatasetPath:   data,
	}
}

// testCPUs is how many CPUs the acceptance tests sweep: all there are, up
// to 4 so the sweep stays short on big machines.
func testCPUs(t *testing.T) int {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	return min(len(cpus), 4)
}

func profileSynth(t *testing.T, knee string, n int) profile.Record {
	t.Helper()
	spec := synthSpec(t, knee, n)
	// The dataset must exist before Profile measures it; the job creates
	// it on its first run.
	if out, err := exec.Command(synthBinary(t), "-data", spec.DatasetPath, "-data-mb", "16", "-steps", "1").CombinedOutput(); err != nil {
		t.Fatalf("create dataset: %v\n%s", err, out)
	}
	start := time.Now()
	var progress []Progress
	rec, err := Profile(context.Background(), "synth-knee"+knee, spec, func(p Progress) { progress = append(progress, p) })
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := chart.Render(&b, rec, "text"); err != nil {
		t.Fatal(err)
	}
	t.Logf("profiled in %v:\n%s", time.Since(start).Round(100*time.Millisecond), b.String())
	checkComplete(t, rec, progress)
	return rec
}

// checkComplete checks the record is whole, whatever the knee.
func checkComplete(t *testing.T, r profile.Record, progress []Progress) {
	t.Helper()
	host, _ := os.Hostname()
	switch {
	case len(r.ID) != 36 || r.Node != host || r.User == "" || r.GPUs != 1 || r.Signal != "regex":
		t.Errorf("identity incomplete: id %q node %q user %q gpus %d signal %q", r.ID, r.Node, r.User, r.GPUs, r.Signal)
	case !r.Finished.After(r.Started):
		t.Errorf("finished %v not after started %v", r.Finished, r.Started)
	case r.DatasetBytes != 16<<20 || r.DiskBW <= 0 || r.MemBW <= 0:
		t.Errorf("memory model inputs: dataset %d, disk %v, memory %v", r.DatasetBytes, r.DiskBW, r.MemBW)
	case len(r.Matrix.CPUs) != len(r.CPUSweep) || len(r.Matrix.MemGB) == 0 || r.Tolerance != DefaultTolerance:
		t.Errorf("matrix %+v for %d sweep points", r.Matrix, len(r.CPUSweep))
	case r.Matrix.At(float64(r.Best.CPUsPerGPU), r.Best.MemGBPerGPU) <= 0:
		t.Errorf("best case %+v has no throughput in the matrix", r.Best)
	}
	for _, m := range r.CPUSweep {
		if m.Throughput <= 0 || m.Samples == 0 || m.Seconds < synthPoint.Seconds()*0.9 {
			t.Errorf("sweep point %+v", m)
		}
	}
	if len(progress) == 0 || progress[len(progress)-1].Point != len(r.CPUSweep) {
		t.Errorf("progress did not end at the last point: %+v", progress)
	}
	announced := map[int]float64{}
	for _, p := range progress {
		if p.CPUs > 0 {
			if _, twice := announced[p.CPUs]; twice {
				t.Errorf("point at %d CPUs announced twice: %+v", p.CPUs, progress)
			}
			announced[p.CPUs] = p.Throughput
		}
	}
	for _, m := range r.CPUSweep {
		if announced[m.CPUs] != m.Throughput {
			t.Errorf("progress announced %v at %d CPUs, the record has %v", announced[m.CPUs], m.CPUs, m.Throughput)
		}
	}
}

// A knee above the node: the profiler must find that every core helps and
// say the model may want more than the node has ("needs ≥ 2 of 2 cores"
// on a 2-core machine).
func TestProfile_SynthWithKneeAboveTheNodeNeedsAllItsCores(t *testing.T) {
	n := testCPUs(t)
	if n < 2 {
		t.Skip("one CPU cannot show a knee above it")
	}
	rec := profileSynth(t, fmt.Sprint(n+1), n)
	if rec.BestCPUs() != n || !rec.MayWantMoreCPUs() {
		t.Fatalf("best case %d CPUs (may want more: %v), want all %d and a note it may want more",
			rec.BestCPUs(), rec.MayWantMoreCPUs(), n)
	}
	var b bytes.Buffer
	_ = chart.Render(&b, rec, "text")
	if want := fmt.Sprintf("needs ≥ %d of %d cores", n, n); !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q", want)
	}
}

// A knee at one core: the profiler must find that one core is enough.
func TestProfile_SynthWithKneeAtOneCoreNeedsOne(t *testing.T) {
	n := testCPUs(t)
	rec := profileSynth(t, "1", n)
	if rec.BestCPUs() != 1 {
		t.Fatalf("best case %d CPUs, want 1", rec.BestCPUs())
	}
	if n > 1 && rec.MayWantMoreCPUs() {
		t.Error("a 1-core knee on a bigger node claims it may want more")
	}
}

func TestProfile_UnusableWorkloadsAreErrorsNotProfiles(t *testing.T) {
	cases := []struct {
		name    string
		argv    []string
		want    error
		mention string
	}{
		{"output without a throughput figure", []string{"sh", "-c", "echo hello; echo still nothing; sleep 10"},
			ErrNoThroughput, "still nothing"},
		{"a workload that fails", []string{"sh", "-c", "echo boom >&2; exit 3"}, ErrWorkloadFailed, "boom"},
		{"a command not on the PATH is a bad spec asking for an absolute path", []string{"lachesis-no-such-command"}, ErrBadSpec, "absolute path"},
		{"an absolute command that does not exist", []string{"/nonexistent/lachesis-no-such-command"}, ErrWorkloadFailed, "lachesis-no-such-command"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Profile(context.Background(), "broken", SweepSpec{Argv: c.argv, PointDuration: 500 * time.Millisecond}, nil)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.mention) {
				t.Fatalf("err = %v, want %v mentioning %q", err, c.want, c.mention)
			}
		})
	}
}

func TestProfile_BadSpecs(t *testing.T) {
	cases := []struct {
		name  string
		model string
		spec  SweepSpec
		want  error
	}{
		{"no model", "", SweepSpec{Argv: []string{"true"}}, ErrBadSpec},
		{"more CPUs than this process may use", "m", SweepSpec{Argv: []string{"true"}, MaxCPUs: 1 << 20}, ErrBadSpec},
		{"more GPUs than CPUs", "m", SweepSpec{Argv: []string{"true"}, MaxCPUs: 1, GPUs: 2, NodeGPUs: 2}, ErrBadSpec},
		{"a dataset that is not there", "m", SweepSpec{Argv: []string{"true"}, DatasetPath: "/nonexistent/lachesis"}, ErrBadSpec},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Profile(context.Background(), c.model, c.spec, nil); !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestProfile_CancelledContextStopsTheWorkload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Profile(ctx, "slow", SweepSpec{Argv: []string{"sh", "-c", "while :; do echo 1 it/s; sleep 0.1; done"},
		PointDuration: time.Minute}, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %v, want the context's deadline promptly", err, time.Since(start))
	}
}
