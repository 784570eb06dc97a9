package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/profiler"
)

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func seededDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lachesis.db")
	s, err := profilestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	rec := profile.Record{ID: "id-1", Model: "bert", Node: "lnode1", User: "alice", GPUs: 1,
		Started: at.Add(-time.Minute), Finished: at, Signal: "regex", Tolerance: 0.1,
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 5, Samples: 3, Seconds: 2}, {CPUs: 2, Throughput: 9.5, Samples: 3, Seconds: 2}},
		Matrix:   sensitivity.Profile{Model: "bert", CPUs: []int{1, 2}, MemGB: []float64{4}, Throughput: [][]float64{{0.5}, {1}}},
		Best:     sensitivity.Demand{CPUsPerGPU: 2, MemGBPerGPU: 4},
	}
	if _, err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteModelKeys(map[string]int{"bert": 1, "gpt": 3}, at); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestListShowsEachModel(t *testing.T) {
	db := seededDB(t)
	out, _, err := runCLI(t, "list", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "MODEL") || !strings.Contains(out, "bert") || !strings.Contains(out, "lnode1") {
		t.Fatalf("list:\n%s", out)
	}
}

func TestShowPrintsTheTableAndWritesPlots(t *testing.T) {
	db := seededDB(t)
	for _, ext := range []string{"png", "svg"} {
		t.Run(ext+" plot is written", func(t *testing.T) {
			plot := filepath.Join(t.TempDir(), "bert."+ext)
			// Flags after the model work too.
			out, _, err := runCLI(t, "show", "bert", "--plot", plot, "--db", db)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "profile bert") || !strings.Contains(out, "chart written") {
				t.Fatalf("show:\n%s", out)
			}
			b, err := os.ReadFile(plot)
			if err != nil || len(b) == 0 {
				t.Fatalf("plot: %v", err)
			}
			if ext == "png" && !bytes.HasPrefix(b, []byte("\x89PNG")) || ext == "svg" && !bytes.Contains(b, []byte("<svg")) {
				t.Fatalf("%s plot starts %q", ext, b[:min(len(b), 16)])
			}
		})
	}
}

func TestShowErrorsAreClear(t *testing.T) {
	db := seededDB(t)
	tests := []struct {
		name string
		args []string
		want error
		text string
	}{
		{"unknown model says so", []string{"show", "nope", "--db", db}, errNoProfile, `"nope"`},
		{"unknown plot format is a usage error", []string{"show", "bert", "--db", db, "--plot", "x.jpg"}, errUsage, ".png or .svg"},
		{"missing model is a usage error", []string{"show", "--db", db}, errUsage, ""},
		{"absent database says so", []string{"show", "bert", "--db", "/nonexistent/x.db"}, profilestore.ErrStore, "/nonexistent/x.db"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, tc.args...)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("got %v; want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}

func TestMissingListsUnprofiledKeys(t *testing.T) {
	db := seededDB(t)
	out, _, err := runCLI(t, "missing", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "gpt") || strings.Contains(out, "bert") {
		t.Fatalf("missing:\n%s", out)
	}
}

func TestDatabaseIsFoundThroughLachesisYAML(t *testing.T) {
	db := seededDB(t)
	etc := t.TempDir()
	os.WriteFile(filepath.Join(etc, "lachesis.yaml"), []byte("db_path: "+db+"\n"), 0o644)
	t.Setenv("SLURM_CONF", filepath.Join(etc, "slurm.conf"))
	t.Setenv("LACHESIS_CONFIG", "")
	out, _, err := runCLI(t, "list")
	if err != nil || !strings.Contains(out, "bert") {
		t.Fatalf("list without --db: %v\n%s", err, out)
	}
}

type fakeAgent struct{ got localapi.ProfileRequest }

func (f *fakeAgent) Profile(_ context.Context, _ localapi.Caller, req localapi.ProfileRequest, progress func(profiler.Progress)) (localapi.Result, error) {
	f.got = req
	progress(profiler.Progress{Point: 1, Points: 2, CPUs: 2, Throughput: 7, Message: "2 CPUs: 7"})
	return localapi.Result{ID: "id-9", Model: req.Model, Points: 2, Best: sensitivity.Demand{CPUsPerGPU: 2, MemGBPerGPU: 8}}, nil
}
func (f *fakeAgent) Status(localapi.Caller) (localapi.Status, error) {
	return localapi.Status{Node: "n1", Controller: "ctl:6830", Pending: 1, Telemetry: "off: no NVIDIA driver", Running: "bert", Queued: 3}, nil
}

func agentSocket(t *testing.T, h localapi.Handler) string {
	dir, err := os.MkdirTemp("", "cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "agent.sock")
	s, err := localapi.Listen(path, h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return path
}

func TestProfileSendsTheCommandAndShowsProgress(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "5") // inside a job: no srun
	agent := &fakeAgent{}
	sock := agentSocket(t, agent)
	out, errOut, err := runCLI(t, "profile", "--agent-socket", sock, "--model", "bert", "--point-seconds", "3",
		"--regex", `(\d+) it/s`, "--dataset", "data", "--", "python", "-u", "train.py", "--epochs", "1")
	if err != nil {
		t.Fatal(err)
	}
	g := agent.got
	if g.Model != "bert" || strings.Join(g.Argv, " ") != "python -u train.py --epochs 1" || g.PointSeconds != 3 || g.Regex != `(\d+) it/s` || g.Dir == "" || len(g.Env) == 0 ||
		g.DatasetPath != filepath.Join(g.Dir, "data") {
		t.Fatalf("request %+v", g)
	}
	if !strings.Contains(errOut, "2 CPUs: 7") || !strings.Contains(out, "best case 2 CPUs and 8.00 GB per GPU") || !strings.Contains(out, "waiting in the node agent's spool") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
}

func TestProfileWithoutAnAgentSaysItIsNotRunning(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "5")
	_, _, err := runCLI(t, "profile", "--agent-socket", "/nonexistent/agent.sock", "--model", "m", "--", "true")
	if !errors.Is(err, localapi.ErrAgentNotRunning) {
		t.Fatalf("got %v", err)
	}
}

func TestProfileNeedsModelAndCommand(t *testing.T) {
	for _, args := range [][]string{{"profile", "--", "true"}, {"profile", "--model", "m"}} {
		if _, _, err := runCLI(t, args...); !errors.Is(err, errUsage) {
			t.Fatalf("%q: got %v, want a usage error", args, err)
		}
	}
}

func TestStatusShowsTheAgent(t *testing.T) {
	sock := agentSocket(t, &fakeAgent{})
	out, _, err := runCLI(t, "status", "--agent-socket", sock)
	if err != nil || !strings.Contains(out, "1 waiting in the spool") || !strings.Contains(out, "no NVIDIA driver") ||
		!strings.Contains(out, "profiling now: bert") || !strings.Contains(out, "queued: 3 more") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	if _, errOut, err := runCLI(t, "frobnicate"); !errors.Is(err, errUsage) || !strings.Contains(errOut, "usage:") {
		t.Fatalf("got %v\n%s", err, errOut)
	}
}

// Issue 26 item 8: after a scale test's 3,000 uniquely named GPU jobs,
// `missing` shows the keys worth profiling (seen in several jobs), most
// submitted first, bounded, and says how many it left out. Issue 20 item
// 9: names users chose reach the admin's terminal without their escape
// sequences, in `missing` and in `list`.
func TestMissingIsBoundedAndPrintable(t *testing.T) {
	db := seededDB(t) // gpt: 3 jobs; bert is profiled
	s, err := profilestore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 6, 2, 10, 0, 0, 0, time.UTC)
	names := map[string]int{}
	for i := 0; i < 3000; i++ {
		names[fmt.Sprintf("job-%d", i)] = 1
	}
	const evil = "llama\x1b]0;owned\x07\x1b[2J\u202e"
	names[evil] = 40
	for i := 0; i < 25; i++ {
		names[fmt.Sprintf("model-%02d", i)] = 5
	}
	if err := s.NoteModelKeys(names, at); err != nil {
		t.Fatal(err)
	}
	rec := profile.Record{ID: "id-2", Model: "vit\x1b[31m", Node: "lnode\x1b[0m2", User: "eve\x07", GPUs: 1,
		Started: at.Add(-time.Minute), Finished: at, Signal: "regex", Tolerance: 0.1,
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 5, Samples: 3, Seconds: 2}},
		Matrix:   sensitivity.Profile{Model: "vit", CPUs: []int{1}, MemGB: []float64{4}, Throughput: [][]float64{{1}}},
		Best:     sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 4},
	}
	if _, err := s.Put(rec); err != nil {
		t.Fatal(err)
	}
	s.Close()

	out, _, err := runCLI(t, "missing", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 22 { // header, 20 keys, the count of the rest
		t.Fatalf("missing printed %d lines, want 22:\n%s", len(lines), out)
	}
	if !strings.HasPrefix(lines[1], "llama]0;owned[2J ") || !strings.Contains(lines[1], " 40 ") {
		t.Errorf("first row %q: want the most submitted key, without its escapes", lines[1])
	}
	if strings.Contains(out, "job-") {
		t.Errorf("missing lists job names seen once:\n%s", out)
	}
	if !strings.Contains(lines[21], "3007 more keys not shown (7 beyond --limit 20, 3000 seen in fewer than --min-jobs 2 jobs)") {
		t.Errorf("last line %q", lines[21])
	}
	all, _, err := runCLI(t, "missing", "--db", db, "--limit", "0", "--min-jobs", "1")
	if err != nil || strings.Count(all, "\n") != 3001+1+25+1 {
		t.Errorf("missing --limit 0 --min-jobs 1: %v, %d lines", err, strings.Count(all, "\n"))
	}

	list, _, err := runCLI(t, "list", "--db", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{out, all, list} {
		if strings.ContainsAny(text, "\x1b\x07\u202e") {
			t.Fatalf("output carries terminal escapes: %q", text)
		}
	}
	if !strings.Contains(list, "vit[31m") || !strings.Contains(list, "lnode[0m2") || !strings.Contains(list, "eve ") {
		t.Errorf("list:\n%s", list)
	}
}

// Outside a job, profile submits itself with srun (one task, the sweep's
// CPUs and the workload's GPUs, the user's srun options) and runs the same
// command line inside it.
func TestProfileOutsideAJobSubmitsItselfWithSrun(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "")
	var got []string
	old := execSrun
	execSrun = func(argv []string) error { got = argv; return nil }
	t.Cleanup(func() { execSrun = old })
	args := []string{"profile", "--model", "bert", "--gpus", "2", "--max-cpus", "8", "--srun-args", "-p gpu --mem=16G", "--", "python", "train.py"}
	if _, _, err := runCLI(t, args...); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	want := append([]string{"srun", "--nodes=1", "--ntasks=1", "--job-name=lachesis-profile", "--cpus-per-task=8", "--gpus=2",
		"-p", "gpu", "--mem=16G", "--", self}, args...)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("srun command line\n%q\nwant\n%q", got, want)
	}
}

// publish marks a user's latest profile of a model (or one by ID) as
// everyone's; it needs MODEL and exactly one of --user and --id.
func TestPublishMarksTheProfileForEveryone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("publish as the database's owner is checked by the cluster test; this one runs as root")
	}
	db := seededDB(t)
	for _, args := range [][]string{{"publish", "bert", "--db", db}, {"publish", "--user", "alice", "--db", db},
		{"publish", "bert", "--user", "alice", "--id", "id-1", "--db", db}} {
		if _, _, err := runCLI(t, args...); !errors.Is(err, errUsage) {
			t.Fatalf("%q: got %v, want a usage error", args, err)
		}
	}
	if _, _, err := runCLI(t, "publish", "bert", "--user", "bob", "--db", db); !errors.Is(err, errNoProfile) {
		t.Fatalf("bob has no profile of bert: got %v", err)
	}
	out, _, err := runCLI(t, "publish", "bert", "--user", "alice", "--db", db)
	if err != nil || !strings.Contains(out, "published profile id-1 of bert") {
		t.Fatalf("publish: %v\n%s", err, out)
	}
	s, err := profilestore.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.LatestPublished(); err != nil || got["bert"].ID != "id-1" {
		t.Fatalf("published: %v, %v", got, err)
	}
}
