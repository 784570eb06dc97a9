package synth

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
)

func TestConfigDefaults(t *testing.T) {
	cases := []struct {
		name        string
		cfg         Config
		wantWorkers int
		wantStep    time.Duration
		wantErr     bool
	}{
		{"workers default to the knee rounded up", Config{Knee: 2.5}, 3, 4 * DefaultSpin * 10 / 25, false},
		{"step cost spreads a batch over the knee's cores", Config{Knee: 4, Batch: 8, Spin: time.Millisecond}, 4, 2 * time.Millisecond, false},
		{"explicit workers are kept", Config{Knee: 1, Workers: 3}, 3, 4 * DefaultSpin, false},
		{"a knee of zero is an error", Config{}, 0, 0, true},
		{"negative steps are an error", Config{Knee: 1, Steps: -1}, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.cfg.withDefaults()
			if c.wantErr {
				if !errors.Is(err, ErrBadConfig) {
					t.Fatalf("err = %v, want ErrBadConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Workers != c.wantWorkers || got.StepCost() != c.wantStep {
				t.Fatalf("workers %d, step %v; want %d, %v", got.Workers, got.StepCost(), c.wantWorkers, c.wantStep)
			}
		})
	}
}

// decode's work is measured in CPU time of its own thread, so it spends
// at least its budget of it (and of wall time), on any machine.
func TestDecode_SpendsItsBudgetOfThreadCPUTime(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const budget = 20 * time.Millisecond
	cpu0, wall0 := threadCPU(), time.Now()
	decode(make([]byte, 64<<10), budget, 0)
	cpu, wall := threadCPU()-cpu0, time.Since(wall0)
	if cpu < budget || wall < budget {
		t.Fatalf("decode spent %v CPU over %v, want at least %v of each", cpu, wall, budget)
	}
	if cpu > 5*budget {
		t.Fatalf("decode overshot: %v of CPU for a %v budget", cpu, budget)
	}
}

// syncBuffer: a log/output sink the code's goroutines may write to.
type syncBuffer = testenv.SyncBuffer

var progressLine = regexp.MustCompile(`^step ([0-9]+) ([0-9.]+) it/s$`)

func TestRun_CreatesItsDatasetAndPrintsThroughputLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data")
	var out syncBuffer
	err := Run(context.Background(), Config{Knee: 1, DataPath: path, DataBytes: 1 << 20,
		Duration: 600 * time.Millisecond, Report: 100 * time.Millisecond, Out: &out, Log: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != 1<<20 {
		t.Fatalf("dataset %v, %v; want 1 MiB", st, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 1 || lines[0] == "" {
		t.Fatalf("no line in 600 ms at 100 ms: %q", out.String())
	}
	for _, l := range lines {
		m := progressLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not a throughput line", l)
		}
	}
	// Any one interval may be slow on a loaded machine (or under -race);
	// over the run there must be steps.
	last := progressLine.FindStringSubmatch(lines[len(lines)-1])
	if steps, _ := strconv.Atoi(last[1]); steps <= 0 {
		t.Fatalf("last line %q shows no progress", lines[len(lines)-1])
	}
}

func TestRun_StopsAfterSteps(t *testing.T) {
	var log bytes.Buffer
	start := time.Now()
	err := Run(context.Background(), Config{Knee: 2, DataPath: filepath.Join(t.TempDir(), "d"), DataBytes: 1 << 20,
		Steps: 5, Out: &bytes.Buffer{}, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "done, 5 steps") || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %s", time.Since(start), log.String())
	}
}

func TestRun_CancelledContextEndsWithoutError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := Run(ctx, Config{Knee: 1, DataPath: filepath.Join(t.TempDir(), "d"), DataBytes: 1 << 20,
		Out: &bytes.Buffer{}, Log: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
}

// A requeued job resumes: a run cut short saves its steps in the
// checkpoint, and the next run counts -steps from there and saves the
// total; a checkpoint that is not a step count is refused, not taken as 0.
func TestRun_ResumesFromItsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	cfg := Config{Knee: 2, IOWait: true, DataPath: filepath.Join(dir, "d"), DataBytes: 1 << 20,
		Checkpoint: ckpt, Out: &bytes.Buffer{}, Log: &bytes.Buffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(ckpt)
	first, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || first < 1 {
		t.Fatalf("checkpoint after a cut-short run: %q (%v)", b, err)
	}
	var log bytes.Buffer
	cfg.Steps, cfg.Log = first+3, &log
	if err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if want := "done, " + strconv.Itoa(first+3) + " steps"; !strings.Contains(log.String(), want) {
		t.Fatalf("resumed run: want %q in %s", want, log.String())
	}
	if b, _ := os.ReadFile(ckpt); strings.TrimSpace(string(b)) != strconv.Itoa(first+3) {
		t.Fatalf("checkpoint after the resumed run: %q, want %d", b, first+3)
	}
	os.WriteFile(ckpt, []byte("-7\n"), 0o644)
	if err := Run(context.Background(), cfg); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("a negative checkpoint: %v, want ErrBadConfig", err)
	}
}
