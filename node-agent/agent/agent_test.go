package agent_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/profile"

	"github.com/lachesis-sched/lachesis/internal/controller/agentserver"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/node-agent/agent"
	"github.com/lachesis-sched/lachesis/node-agent/config"
	"github.com/lachesis-sched/lachesis/node-agent/localapi"
	"github.com/lachesis-sched/lachesis/node-agent/telemetry"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
	"github.com/lachesis-sched/lachesis/profiler"
)

const alice = 4242

func users(uid uint32) (agent.User, error) {
	switch uid {
	case alice:
		return agent.User{Name: "alice", GID: 4242, Groups: []uint32{4242, 100}}, nil
	case 0:
		return agent.User{Name: "root"}, nil
	}
	return agent.User{}, errors.New("unknown uid")
}

// fakeProfiler measures two points and records what it was asked.
type fakeProfiler struct {
	mu    sync.Mutex
	specs []profiler.SweepSpec
	fail  error
	block chan struct{}
	nan   bool // return a record with a NaN throughput
}

func (f *fakeProfiler) profile(ctx context.Context, model string, spec profiler.SweepSpec, progress func(profiler.Progress)) (profile.Record, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return profile.Record{}, ctx.Err()
		}
	}
	progress(profiler.Progress{Points: 2, Message: "measuring 2 CPUs"})
	progress(profiler.Progress{Point: 1, Points: 2, CPUs: 2, Throughput: 10})
	if f.fail != nil {
		return profile.Record{}, f.fail
	}
	progress(profiler.Progress{Point: 2, Points: 2, CPUs: 1, Throughput: 6})
	if f.nan {
		return profile.Record{ID: "nan", Model: model, CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: math.NaN()}}}, nil
	}
	return profile.Record{
		ID: "uuid-" + model, Model: model, Node: "hostname", User: "x", Finished: time.Now(),
		CPUSweep: []profile.Measurement{{CPUs: 1, Throughput: 6}, {CPUs: 2, Throughput: 10}},
		Best:     sensitivity.Demand{CPUsPerGPU: 2, MemGBPerGPU: 4},
	}, nil
}

// inJob: every caller is in job 77 (the cluster tests find real jobs).
func inJob(context.Context, localapi.Caller, string) (agent.CallerJob, error) {
	return agent.CallerJob{ID: 77}, nil
}

type harness struct {
	t     *testing.T
	cfg   config.Config
	agent *agent.Agent
	prof  *fakeProfiler
	fake  *mungetest.Fake
	ctl   *profilestore.Store
	srv   *agentserver.Server
	logs  *syncBuffer
}

// syncBuffer: a log/output sink the code's goroutines may write to.
type syncBuffer = testenv.SyncBuffer

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// newHarness starts an agent (not its controller: see startController).
func newHarness(t *testing.T, mod func(*config.Config, *agent.Deps)) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "ag")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := config.Default()
	cfg.Controller = freeAddr(t)
	cfg.Node = "lnode9"
	cfg.Spool = filepath.Join(dir, "spool.db")
	cfg.Socket = filepath.Join(dir, "agent.sock")
	cfg.TelemetryInterval = 0
	cfg.MinPointDuration = 100 * time.Millisecond // the fake profiler's points are short
	cfg.Delivery.RetryMin, cfg.Delivery.RetryMax = 20*time.Millisecond, 100*time.Millisecond
	cfg.Delivery.Timeout = time.Second
	h := &harness{t: t, prof: &fakeProfiler{}, fake: &mungetest.Fake{}, logs: &syncBuffer{}}
	deps := agent.Deps{Signer: h.fake, Profile: h.prof.profile, Users: users, CallerJob: inJob}
	if mod != nil {
		mod(&cfg, &deps)
	}
	h.cfg = cfg
	h.agent, err = agent.New(cfg, deps, slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.agent.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent.Run: %v", err)
		}
	})
	// Wait for the socket.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := localapi.GetStatus(context.Background(), cfg.Socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent socket never answered\n%s", h.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return h
}

func (h *harness) startController() {
	h.t.Helper()
	store, err := profilestore.Open(filepath.Join(h.t.TempDir(), "ctl.db"))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { store.Close() })
	srv, err := agentserver.Start(context.Background(), h.cfg.Controller, agentserver.Config{}, h.fake, store, slog.New(slog.DiscardHandler))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { srv.Close() })
	h.ctl, h.srv = store, srv
}

func (h *harness) status() localapi.Status {
	st, err := h.agent.Status(localapi.Caller{})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var aliceCaller = localapi.Caller{UID: alice, GID: alice, PID: 1}

func request(model string) localapi.ProfileRequest {
	return localapi.ProfileRequest{Model: model, Argv: []string{"/home/alice/venv/bin/python", "train.py"}, Dir: "/home/alice", PointSeconds: 5}
}

func TestProfileRunsAsTheCallerAndReachesTheController(t *testing.T) {
	h := newHarness(t, nil)
	h.startController()
	var seen int
	res, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), func(profiler.Progress) { seen++ })
	if err != nil {
		t.Fatal(err)
	}
	if !res.Delivered || res.ID != "uuid-bert" || res.User != "alice" || res.Points != 2 || seen != 3 {
		t.Fatalf("result %+v after %d progress events", res, seen)
	}
	spec := h.prof.specs[0]
	c := spec.Credential
	if c == nil || c.Uid != alice || c.Gid != 4242 || len(c.Groups) != 2 {
		t.Fatalf("workload credential %+v; want alice's", c)
	}
	if spec.PointDuration != 5*time.Second || spec.Dir != "/home/alice" || spec.Argv[1] != "train.py" {
		t.Fatalf("spec %+v", spec)
	}
	got, ok, err := h.ctl.Latest("bert")
	if err != nil || !ok {
		t.Fatalf("not at the controller: %v", err)
	}
	if got.Node != "lnode9" || got.User != "alice" {
		t.Fatalf("stored record says node %q user %q; want the agent's node and the caller", got.Node, got.User)
	}
}

func TestRootIsRefusedUnlessAllowed(t *testing.T) {
	tests := []struct {
		name  string
		allow bool
		want  error
	}{
		{"root is refused by default", false, agent.ErrRootRefused},
		{"root is accepted when allowed", true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *config.Config, _ *agent.Deps) { c.AllowRootProfiling = tc.allow })
			_, err := h.agent.Profile(context.Background(), localapi.Caller{UID: 0}, request("bert"), nil)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want != nil && len(h.prof.specs) != 0 {
				t.Fatal("the profiler ran for a refused request")
			}
		})
	}
}

func TestRootRefusalReachesTheCLIOverTheSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "the test process must be root to be refused as root")
	}
	h := newHarness(t, nil)
	_, err := localapi.Profile(context.Background(), h.cfg.Socket, request("bert"), nil)
	if !errors.Is(err, localapi.ErrAgent) || !strings.Contains(err.Error(), "as root is refused") {
		t.Fatalf("got %v", err)
	}
}

func TestBadRequestsAreRefused(t *testing.T) {
	h := newHarness(t, nil)
	tests := []struct {
		name string
		mod  func(*localapi.ProfileRequest)
		want error
	}{
		{"missing model is refused", func(r *localapi.ProfileRequest) { r.Model = " " }, agent.ErrBadRequest},
		{"missing command is refused", func(r *localapi.ProfileRequest) { r.Argv = nil }, agent.ErrBadRequest},
		{"relative directory is refused", func(r *localapi.ProfileRequest) { r.Dir = "work" }, agent.ErrBadRequest},
		{"negative duration is refused", func(r *localapi.ProfileRequest) { r.PointSeconds = -1 }, agent.ErrBadRequest},
		{"absent dataset is refused", func(r *localapi.ProfileRequest) { r.DatasetPath = "/nonexistent/data" }, agent.ErrBadRequest},
		{"dataset alice cannot read is refused", func(r *localapi.ProfileRequest) { r.DatasetPath = "/root" }, agent.ErrNoAccess},
		{"relative dataset is refused", func(r *localapi.ProfileRequest) { r.DatasetPath = "data" }, agent.ErrBadRequest},
		{"bare command without a PATH is refused", func(r *localapi.ProfileRequest) { r.Argv = []string{"python3"} }, agent.ErrBadRequest},
		{"point_seconds of 1e6 is refused", func(r *localapi.ProfileRequest) { r.PointSeconds = 1e6 }, agent.ErrBadRequest},
		{"point_seconds just above the cap is refused", func(r *localapi.ProfileRequest) { r.PointSeconds = 600.5 }, agent.ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := request("bert")
			tc.mod(&req)
			if _, err := h.agent.Profile(context.Background(), aliceCaller, req, nil); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	if len(h.prof.specs) != 0 {
		t.Fatal("the profiler ran for a refused request")
	}
}

func TestReadableDatasetIsAccepted(t *testing.T) {
	h := newHarness(t, nil)
	dir, err := os.MkdirTemp("", "data")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	data := filepath.Join(dir, "data.bin")
	os.WriteFile(data, []byte("x"), 0o644)
	req := request("bert")
	req.DatasetPath = data
	if _, err := h.agent.Profile(context.Background(), aliceCaller, req, nil); err != nil {
		t.Fatal(err)
	}
	if h.prof.specs[0].DatasetPath != data {
		t.Fatalf("dataset not passed on")
	}
}

func TestProfileWaitsInTheSpoolWhileTheControllerIsDown(t *testing.T) {
	h := newHarness(t, nil)
	res, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered || h.status().Pending != 1 {
		t.Fatalf("result %+v, status %+v; want it pending", res, h.status())
	}
	h.startController()
	waitFor(t, "delivery", func() bool { return h.status().Pending == 0 })
	if n, _ := h.ctl.Count("bert"); n != 1 {
		t.Fatalf("%d rows at the controller", n)
	}
}

func TestFailedProfileSpoolsNothingToDeliver(t *testing.T) {
	h := newHarness(t, nil)
	h.prof.fail = errors.New("workload failed: exit status 1")
	if _, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil); err == nil {
		t.Fatal("no error")
	}
	if st := h.status(); st.Pending != 0 || st.Delivered != 0 {
		t.Fatalf("status %+v", st)
	}
	if !strings.Contains(h.logs.String(), "profiling failed") {
		t.Fatalf("failure not logged:\n%s", h.logs)
	}
}

func TestUnusableRecordFailsTheRunInsteadOfBeingSpooled(t *testing.T) {
	h := newHarness(t, nil)
	h.prof.nan = true
	_, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil)
	if !errors.Is(err, wire.ErrBody) {
		t.Fatalf("got %v, want a wire.ErrBody validation error", err)
	}
	if st := h.status(); st.Pending != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestSecondRequestWaitsForTheFirst(t *testing.T) {
	h := newHarness(t, nil)
	h.prof.block = make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil)
		first <- err
	}()
	waitFor(t, "the first sweep", func() bool { return h.status().Running == "bert" })
	msgs := make(chan string, 10)
	second := make(chan error, 1)
	go func() {
		_, err := h.agent.Profile(context.Background(), aliceCaller, request("gpt"), func(p profiler.Progress) { msgs <- p.Message })
		second <- err
	}()
	if m := <-msgs; !strings.Contains(m, "waiting: place 1 in this node's queue; the profile of bert is running") {
		t.Fatalf("first message %q", m)
	}
	close(h.prof.block)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

type fakeSource struct{ samples chan struct{} }

func (f fakeSource) Sample() ([]wire.GPU, error) {
	select {
	case f.samples <- struct{}{}:
	default:
	}
	return []wire.GPU{{Index: 0, UUID: "GPU-x", UtilPct: 33}}, nil
}
func (fakeSource) Close() error { return nil }

func TestTelemetryReachesTheController(t *testing.T) {
	h := newHarness(t, func(c *config.Config, d *agent.Deps) {
		c.TelemetryInterval = 50 * time.Millisecond
		d.Telemetry = fakeSource{samples: make(chan struct{}, 1)}
	})
	h.startController()
	waitFor(t, "telemetry", func() bool {
		gpus, _, _ := h.ctl.Telemetry("lnode9")
		return len(gpus) == 1 && gpus[0].UtilPct == 33
	})
	waitFor(t, "status", func() bool { return h.status().Telemetry == "on: 1 GPUs" })
}

func TestNoDriverTurnsTelemetryOff(t *testing.T) {
	h := newHarness(t, func(c *config.Config, d *agent.Deps) {
		c.TelemetryInterval = 10 * time.Millisecond
		d.Telemetry = telemetry.Disabled{Reason: telemetry.ErrNoDriver}
	})
	waitFor(t, "telemetry off", func() bool { return h.status().Telemetry == "off: no NVIDIA driver" })
}

func TestMetricsCountRunsByOutcomeAndFailedDeliveries(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil); err != nil {
		t.Fatal(err)
	}
	// The controller is down: the deliverer's attempts fail and are counted.
	waitFor(t, "a failed delivery", func() bool {
		n, _ := gathered(t, h.agent, agent.MetricDeliveryFailures, `kind="profile"`)
		return n >= 1
	})
	h.prof.fail = errors.New("workload failed: exit status 1")
	h.agent.Profile(context.Background(), aliceCaller, request("gpt"), nil)
	h.prof.fail = nil
	h.prof.nan = true
	h.agent.Profile(context.Background(), aliceCaller, request("vit"), nil)
	tests := []struct {
		name, metric, labels string
		want                 float64
	}{
		{"one completed run", agent.MetricProfilingRuns, `outcome="completed"`, 1},
		{"two failed runs: workload failure and unusable record", agent.MetricProfilingRuns, `outcome="failed"`, 2},
		{"no interrupted run", agent.MetricProfilingRuns, `outcome="interrupted"`, 0},
		{"one profile waits in the spool", agent.MetricSpoolPending, "", 1},
		{"no telemetry failures with telemetry off", agent.MetricDeliveryFailures, `kind="telemetry"`, 0},
		{"telemetry down without a source", telemetry.MetricGPUUp, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := gathered(t, h.agent, tt.metric, tt.labels)
			if !ok || got != tt.want {
				t.Fatalf("%s{%s} = %v (found %v), want %v", tt.metric, tt.labels, got, ok, tt.want)
			}
		})
	}
}

func TestMetricsAreServedOnlyWhenConfigured(t *testing.T) {
	addr := freeAddr(t)
	newHarness(t, func(c *config.Config, _ *agent.Deps) { c.MetricsListen = addr })
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), agent.MetricSpoolPending+" 0") {
		t.Fatalf("scrape lacks the spool depth:\n%s", body)
	}
}

// gathered returns the value of the series of name whose labels, written
// as in the exposition format, contain labels.
func gathered(t *testing.T, a *agent.Agent, name, labels string) (float64, bool) {
	t.Helper()
	mfs, err := a.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+`="`+lp.GetValue()+`"`)
			}
			if !strings.Contains(strings.Join(ls, ","), labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// On a node without NVML (fake GPUs), a profile is recorded with the
// node's typed GRES and reaches the controller with it; an admin's
// gpu_type wins over detection.
func TestProfileCarriesTheNodesGPUType(t *testing.T) {
	cases := []struct {
		name, cfgType, gres, want string
	}{
		{"typed GRES without NVML gives its type", "", "gpu:b:2(S:0)", "b"},
		{"configured type wins", "a100", "gpu:b:2", "a100"},
		{"untyped node records no type", "", "gpu:2", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *config.Config, d *agent.Deps) {
				c.GPUType = tc.cfgType
				d.NodeGres = func() (string, error) { return tc.gres, nil }
			})
			h.startController()
			if _, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil); err != nil {
				t.Fatal(err)
			}
			got, ok, err := h.ctl.Latest("bert")
			if err != nil || !ok || got.GPUType != tc.want {
				t.Fatalf("stored profile GPU type %q (%v, %v), want %q", got.GPUType, ok, err, tc.want)
			}
		})
	}
}

// A caller in no job of theirs on the node is refused with a message that
// says how to get one, and nothing runs.
func TestCallerWithoutAJobIsRefused(t *testing.T) {
	h := newHarness(t, func(_ *config.Config, d *agent.Deps) {
		d.CallerJob = func(context.Context, localapi.Caller, string) (agent.CallerJob, error) {
			return agent.CallerJob{}, agent.ErrNoJob
		}
	})
	_, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil)
	if !errors.Is(err, agent.ErrNoJob) || !strings.Contains(err.Error(), "srun") {
		t.Fatalf("got %v, want ErrNoJob saying how to get a job", err)
	}
	if len(h.prof.specs) != 0 {
		t.Fatal("the profiler ran for a caller without a job")
	}
	if !strings.Contains(h.logs.String(), "profile request refused") {
		t.Fatalf("the refusal is not logged:\n%s", h.logs.String())
	}
}

// The sweep is told the caller's job and process, and a request without
// an environment runs with an empty one, not the agent's.
func TestSweepRunsInTheCallersJobWithItsOwnEnvironmentOnly(t *testing.T) {
	h := newHarness(t, nil)
	t.Setenv("LACHESIS_AGENT_SECRET", "root-only")
	req := request("bert")
	req.Argv[0] = "/bin/true"
	if _, err := h.agent.Profile(context.Background(), aliceCaller, req, nil); err != nil {
		t.Fatal(err)
	}
	spec := h.prof.specs[0]
	if spec.Job == nil || spec.Job.ID != 77 || spec.Job.PID != int(aliceCaller.PID) {
		t.Fatalf("sweep's job %+v, want job 77 and the caller's pid", spec.Job)
	}
	if spec.Env == nil || len(spec.Env) != 0 {
		t.Fatalf("workload environment %q, want an empty one", spec.Env)
	}
}

// When the caller's step ends, its sweep is stopped.
func TestSweepStopsWhenTheJobsStepEnds(t *testing.T) {
	step := exec.Command("/bin/sleep", "60")
	if err := step.Start(); err != nil {
		t.Fatal(err)
	}
	defer step.Process.Kill()
	h := newHarness(t, func(_ *config.Config, d *agent.Deps) {
		d.CallerJob = func(context.Context, localapi.Caller, string) (agent.CallerJob, error) {
			return agent.CallerJob{ID: 77, StepPID: step.Process.Pid}, nil
		}
	})
	h.prof.block = make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		_, err := h.agent.Profile(context.Background(), aliceCaller, request("bert"), nil)
		errc <- err
	}()
	waitFor(t, "the sweep", func() bool { return h.status().Running == "bert" })
	step.Process.Kill()
	step.Wait()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "job the sweep ran in ended") {
			t.Fatalf("got %v, want the job's end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sweep outlived its job's step")
	}
}
