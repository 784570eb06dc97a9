package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/protocol/munge/mungetest"
	"github.com/lachesis-sched/lachesis/internal/protocol/wire"
	"github.com/lachesis-sched/lachesis/internal/rigs/testenv"
	"github.com/lachesis-sched/lachesis/profile"
	"github.com/lachesis-sched/lachesis/profile/sensitivity"
)

// testUser is the unprivileged user who asks for profiles: the agent must
// run the workload as them, never as root.
const testUser = "lachesis-test"

// agentEnv is a cluster whose core listens for node agents, plus a node
// agent (the real binary, as a subprocess) reporting to it.
type agentEnv struct {
	*env
	listen    string // the core's agent listener
	socket    string // munged's socket of the cluster
	bin       string // lachesis-node-agent, lachesis-profiler, lachesis-synth
	work      string // the test user's working directory
	agentCfg  string
	agentSock string
	agentLog  string
	agent     *exec.Cmd
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// buildCommands builds the agent, the CLI and the synthetic workload once
// per test binary into testDirRoot/agent-bin (replaced by the next run, so
// nothing piles up), which every user can read and execute.
func buildCommands(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir = filepath.Join(testDirRoot, "agent-bin")
		os.RemoveAll(binDir)
		if buildErr = os.MkdirAll(binDir, 0o755); buildErr != nil {
			return
		}
		for d := binDir; d != filepath.Dir(d); d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
				buildErr = fmt.Errorf("%s is not world-readable; the test user could not run the workload", d)
				return
			}
		}
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = "/usr/local/go/bin/go"
		}
		cmd := exec.Command(goBin, "build", "-o", binDir+"/",
			"./cmd/lachesis-node-agent", "./cmd/lachesis-profiler", "./cmd/lachesis-synth")
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// mungeSocketOf reads munged's socket from the cluster's slurm.conf
// AuthInfo line, as slurmctld does.
func mungeSocketOf(t *testing.T, conf string) string {
	t.Helper()
	b, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "AuthInfo="); ok {
			return munge.SocketFromAuthInfo(v)
		}
	}
	return munge.DefaultSocket
}

// startAgentCluster brings up one node whose core listens for agents, and
// a node agent for it.
func startAgentCluster(t *testing.T) *agentEnv { return startAgentClusterWith(t, "") }

// startAgentClusterWith adds agentYAML (indented keys) to lachesis.yaml's
// agent section.
func startAgentClusterWith(t *testing.T, agentYAML string) *agentEnv {
	t.Helper()
	return startAgentClusterFull(t, agentYAML, "", "", nil)
}

// startAgentClusterFull also appends coreExtra (top-level keys) to
// lachesis.yaml and nodeExtra (top-level keys) to node-agent.yaml, and
// slurm.conf lines that extraConf makes from the agent's socket path (known
// before the cluster starts).
func startAgentClusterFull(t *testing.T, agentYAML, coreExtra, nodeExtra string, extraConf func(agentSock string) []string) *agentEnv {
	t.Helper()
	// Job cgroups, as on a production node: sweeps run in them.
	return startAgentClusterShaped(t, shape{Nodes: 1, GPUs: 4, Cgroups: true}, agentYAML, coreExtra, nodeExtra, extraConf)
}

// startAgentClusterShaped is startAgentClusterFull on a cluster of shape
// hw (one node).
func startAgentClusterShaped(t *testing.T, hw shape, agentYAML, coreExtra, nodeExtra string, extraConf func(agentSock string) []string) *agentEnv {
	t.Helper()
	parallelUnlessAlone(t)
	bin := buildCommands(t)
	u := testenv.EnsureUser(t, testUser)
	listen := freeTCPAddr(t)
	// Short paths (a unix socket address holds 107 bytes) that the test
	// user can reach.
	dir, err := os.MkdirTemp("", "lachesis-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	var conf []string
	if extraConf != nil {
		conf = extraConf(filepath.Join(dir, "agent.sock"))
	}
	e := &agentEnv{
		env:    startShapedCluster(t, hw, "agent:\n  listen: "+listen+"\n"+agentYAML+coreExtra, conf...),
		listen: listen,
		bin:    bin,
	}
	e.socket = mungeSocketOf(t, e.c.Conf)
	e.work = filepath.Join(dir, "work")
	os.Mkdir(e.work, 0o755)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(e.work, uid, gid); err != nil {
		t.Fatal(err)
	}
	e.agentSock = filepath.Join(dir, "agent.sock")
	e.agentLog = filepath.Join(e.dir, "log", "node-agent.log")
	e.agentCfg = filepath.Join(dir, "node-agent.yaml")
	yaml := fmt.Sprintf(`controller: %s
munge_socket: %s
spool: %s
socket: %s
node: lnode1
telemetry_interval: 1
min_point_seconds: 1
log_level: debug
delivery:
  retry_min: 0.2
  retry_max: 1
  timeout: 3
`, listen, e.socket, filepath.Join(dir, "spool", "spool.db"), e.agentSock) + nodeExtra
	if err := os.WriteFile(e.agentCfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	return e
}

func (e *agentEnv) startAgent() {
	e.t.Helper()
	logf, err := os.OpenFile(e.agentLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(e.bin, "lachesis-node-agent"), "-config", e.agentCfg)
	// The agent asks this cluster's Slurm (squeue) about its callers' jobs.
	cmd.Env = append(os.Environ(), "SLURM_CONF="+e.c.Conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.agent = cmd
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
			e.t.Errorf("the node agent ignored SIGTERM for 20 s")
		}
		if e.t.Failed() {
			b, _ := os.ReadFile(e.agentLog)
			e.t.Logf("node agent log:\n%s", b)
		}
	})
	e.eventually(20*time.Second, "the node agent's socket", func() (bool, string) {
		out, err := e.profilerCLI("", "status", "--agent-socket", e.agentSock)
		return err == nil, out
	})
}

// profilerCLI runs lachesis-profiler, as asUser when it is not "".
func (e *agentEnv) profilerCLI(asUser string, args ...string) (string, error) {
	argv := append([]string{filepath.Join(e.bin, "lachesis-profiler")}, args...)
	if asUser != "" {
		argv = append([]string{"runuser", "-u", asUser, "--"}, argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(), "TMPDIR="+e.work, "SLURM_CONF="+e.c.Conf)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// profile profiles model with a tiny real workload (the synthetic training
// job, 2 s per sweep point) as the test user, through the CLI and the agent.
// Each sweep point first appends the workload's uid and allowed CPUs to
// work/points, so tests can see who ran it and on how many CPUs.
func (e *agentEnv) profile(model string) string {
	e.t.Helper()
	synth := filepath.Join(e.bin, "lachesis-synth")
	script := `{ id -u; grep Cpus_allowed_list /proc/self/status; } >> points; exec ` + synth + ` -knee 1 -seconds 0 -data-mb 4`
	out, err := e.profilerCLI(testUser, "profile", "--agent-socket", e.agentSock, "--model", model,
		"--point-seconds", "2", "--max-cpus", "2", "--", "/bin/sh", "-c", script)
	if err != nil {
		e.t.Fatalf("lachesis-profiler profile: %v\n%s", err, out)
	}
	return out
}

func (e *agentEnv) store() *profilestore.Store {
	e.t.Helper()
	s, err := profilestore.OpenReadOnly(filepath.Join(e.dir, "lachesis", "lachesis.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// profileCount counts model's rows in the controller's SQLite.
func (e *agentEnv) profileCount(model string) int {
	e.t.Helper()
	s := e.store()
	defer s.Close()
	n, err := s.Count(model)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *agentEnv) agentLogText() string {
	b, _ := os.ReadFile(e.agentLog)
	return string(b)
}

func TestAgentProfileReachesTheControllerDB(t *testing.T) {
	e := startAgentCluster(t)
	out := e.profile("synth-a")
	if !strings.Contains(out, "delivered to the controller") {
		t.Fatalf("CLI output:\n%s", out)
	}
	s := e.store()
	defer s.Close()
	rec, ok, err := s.Latest("synth-a")
	if err != nil || !ok {
		t.Fatalf("profile not in the controller's SQLite: %v\nCLI:\n%s", err, out)
	}
	if rec.User != testUser || rec.Node != "lnode1" || len(rec.CPUSweep) == 0 || rec.Best.CPUsPerGPU == 0 {
		t.Fatalf("stored profile: user %q node %q, %d points, best %+v", rec.User, rec.Node, len(rec.CPUSweep), rec.Best)
	}
	for _, m := range rec.CPUSweep {
		if !(m.Throughput > 0) {
			t.Fatalf("point %+v has no throughput", m)
		}
	}
	if !e.logMatches(`lachesis: profile stored model=synth-a id=` + rec.ID) {
		t.Fatal("slurmctld's log does not show the profile arriving")
	}
	// Without an NVIDIA driver the agent says so once and carries on.
	if _, err := os.Stat("/proc/driver/nvidia"); os.IsNotExist(err) {
		if n := strings.Count(e.agentLogText(), "no NVIDIA driver: GPU telemetry off"); n != 1 {
			t.Fatalf("the agent said %d times that telemetry is off", n)
		}
	}
	// The workload ran as the user who asked, never as root, and each
	// point on that point's CPUs only.
	u := testenv.EnsureUser(t, testUser)
	b, err := os.ReadFile(filepath.Join(e.work, "points"))
	if err != nil {
		t.Fatal(err)
	}
	cpuLists := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			cpuLists[strings.TrimSpace(v)] = true
		} else if line != u.Uid {
			t.Fatalf("a sweep point ran as uid %s, want %s (%s)", line, u.Uid, testUser)
		}
	}
	if len(cpuLists) < 2 {
		t.Fatalf("sweep points ran on CPU lists %v; want one per CPU count", cpuLists)
	}
}

// On a node whose GPUs Slurm types (Gres=gpu:v100:4(S:0), gres.conf
// naming their cores) and no NVIDIA driver, a profile is recorded with
// the node's GPU type as scontrol reports it: the agent asks slurmctld
// through internal/slurmcmd's runner.
func TestAProfileOnATypedNodeCarriesSlurmsGPUType(t *testing.T) {
	if _, err := os.Stat("/proc/driver/nvidia"); err == nil {
		t.Fatal("this test needs a node without an NVIDIA driver: NVML's device name would decide the type")
	}
	e := startAgentClusterShaped(t, shape{Nodes: 1, GPUs: 4, Cgroups: true, GPUTypes: "v100:1", GresCores: true}, "", "", "", nil)
	e.profile("synth-typed")
	s := e.store()
	defer s.Close()
	rec, ok, err := s.Latest("synth-typed")
	if err != nil || !ok {
		t.Fatalf("profile not stored: %v", err)
	}
	if rec.GPUType != "v100" {
		t.Fatalf("stored profile's GPU type is %q, want v100 (the node's typed GRES)", rec.GPUType)
	}
}

func TestAgentRootRequestIsRefused(t *testing.T) {
	e := startAgentCluster(t)
	out, err := e.profilerCLI("", "profile", "--agent-socket", e.agentSock, "--model", "as-root", "--", "true")
	if err == nil || !strings.Contains(out, "as root is refused") {
		t.Fatalf("root's request was not refused: %v\n%s", err, out)
	}
}

func TestAgentProfileWaitsForControllerAndArrivesOnce(t *testing.T) {
	e := startAgentCluster(t)
	// The sweep runs in a job, which needs slurmctld to start: slurmctld
	// dies once the sweep runs, so the profile is made while it is down.
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := e.profilerCLI(testUser, "profile", "--agent-socket", e.agentSock, "--model", "synth-b",
			"--point-seconds", "5", "--max-cpus", "2", "--", filepath.Join(e.bin, "lachesis-synth"), "-knee", "1", "-seconds", "0", "-data-mb", "4")
		done <- result{out, err}
	}()
	e.eventually(60*time.Second, "the sweep to start", func() (bool, string) {
		return regexp.MustCompile(`msg=profiling .*model=synth-b`).MatchString(e.agentLogText()), e.agentLogText()
	})
	if err := e.c.KillController(); err != nil {
		t.Fatal(err)
	}
	e.eventually(10*time.Second, "slurmctld to be gone", func() (bool, string) {
		c, err := net.DialTimeout("tcp", e.listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil, "the agent listener still answers"
	})

	var res result
	select {
	case res = <-done:
	case <-time.After(4 * time.Minute):
		t.Fatal("the profile never finished")
	}
	out := res.out
	if res.err != nil || !strings.Contains(out, "waiting in the node agent's spool") {
		t.Fatalf("CLI output with slurmctld down:\n%s", out)
	}
	e.eventually(20*time.Second, "a delivery attempt to fail", func() (bool, string) {
		return strings.Contains(e.agentLogText(), "profile delivery failed; profiles wait in the spool"), ""
	})
	status, err := e.profilerCLI("", "status", "--agent-socket", e.agentSock)
	if err != nil || !strings.Contains(status, "1 waiting in the spool, 0 delivered") {
		t.Fatalf("agent status: %v\n%s", err, status)
	}
	if n := e.profileCount("synth-b"); n != 0 {
		t.Fatalf("%d rows while slurmctld is down", n)
	}

	if err := e.c.RestartController(); err != nil {
		t.Fatal(err)
	}
	e.eventually(30*time.Second, "the spooled profile at the controller", func() (bool, string) {
		n := e.profileCount("synth-b")
		return n > 0, fmt.Sprintf("%d rows", n)
	})
	// Retries go on for a while if anything was left undelivered; after
	// several retry periods there is still exactly one row.
	time.Sleep(3 * time.Second)
	if n := e.profileCount("synth-b"); n != 1 {
		t.Fatalf("%d rows for one profile, want exactly 1", n)
	}
	status, err = e.profilerCLI("", "status", "--agent-socket", e.agentSock)
	if err != nil || !strings.Contains(status, "0 waiting in the spool, 1 delivered") {
		t.Fatalf("agent status after the restart: %v\n%s", err, status)
	}
	if n := strings.Count(e.c.ControllerLog(), "lachesis: profile stored model=synth-b"); n != 1 {
		t.Fatalf("slurmctld stored synth-b %d times", n)
	}
	if !strings.Contains(e.agentLogText(), "profile delivery failed; profiles wait in the spool") {
		t.Fatal("the agent never said that delivery failed while slurmctld was down")
	}
}

// attack is one kind of abuse of the core's agent port.
type attack struct {
	name   string
	reason string // the reason slurmctld's log must give
	raw    func(t *testing.T) []byte
}

func reportFrame(t *testing.T, signer wire.Signer, model string) []byte {
	t.Helper()
	rec := profile.Record{ID: fmt.Sprintf("abuse-%d", time.Now().UnixNano()), Model: model, Node: "evil", Finished: time.Now(),
		Best: sensitivity.Demand{CPUsPerGPU: 1, MemGBPerGPU: 1}}
	b, err := wire.EncodeReport(signer, wire.TypeProfile, &wire.ProfileReport{Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type signerFunc func([]byte) (string, error)

func (f signerFunc) Sign(p []byte) (string, error) { return f(p) }

func TestControllerRejectsAbuseAndKeepsScheduling(t *testing.T) {
	e := startAgentCluster(t)
	clusterMunge := &munge.Client{Socket: e.socket}
	// A munged with another key: its credentials are well-formed forgeries.
	base, err := os.MkdirTemp("", "lachesis-forger-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() { os.RemoveAll(base) })
	forger := &munge.Client{Socket: mungetest.StartMunged(t, base)}

	attacks := []attack{
		{"random bytes", "bad_magic", func(*testing.T) []byte {
			b := make([]byte, 64<<10)
			rand.Read(b)
			copy(b, "JUNK")
			return b
		}},
		{"a header claiming 1 GB", "too_large", func(*testing.T) []byte {
			h := wire.AppendHeader(nil, wire.TypeProfile, 1, 0)
			binary.BigEndian.PutUint32(h[8:], 1<<30)
			return h
		}},
		{"an unknown version", "bad_version", func(t *testing.T) []byte {
			b := reportFrame(t, clusterMunge, "abuse-version")
			b[4] = 99
			return b
		}},
		{"an absent credential", "bad_credential_length", func(t *testing.T) []byte {
			body, err := wire.Marshal(&wire.ProfileReport{Record: profile.Record{ID: "abuse-absent", Model: "abuse-absent"}})
			if err != nil {
				t.Fatal(err)
			}
			return append(wire.AppendHeader(nil, wire.TypeProfile, 0, len(body)), body...)
		}},
		{"a credential of another munge key", "bad_credential", func(t *testing.T) []byte {
			return reportFrame(t, forger, "abuse-forged")
		}},
		{"a credential with flipped bytes", "bad_credential", func(t *testing.T) []byte {
			return reportFrame(t, signerFunc(func(p []byte) (string, error) {
				c, err := clusterMunge.Sign(p)
				if err != nil {
					return "", err
				}
				b := []byte(c)
				for i := 10; i < 20 && i < len(b)-1; i++ {
					b[i] ^= 0x01
				}
				return string(b), nil
			}), "abuse-flipped")
		}},
		{"a credential for another body", "digest_mismatch", func(t *testing.T) []byte {
			return reportFrame(t, signerFunc(func([]byte) (string, error) {
				return clusterMunge.Sign(wire.Digest(wire.TypeProfile, []byte("another body")))
			}), "abuse-digest")
		}},
	}

	// Idle connections from another host, held open all along: they must
	// not stall anything (the core closes them at its auth deadline).
	var idle []net.Conn
	for i := 0; i < 20; i++ {
		if c, err := dialFrom("127.0.0.2", e.listen); err == nil {
			idle = append(idle, c)
		}
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()

	// A job runs while the port is abused.
	job := e.submit("-J", "during-abuse", "--wrap", "sleep 4")
	e.waitState(job, "RUNNING", 30*time.Second)

	for _, a := range attacks {
		begin := time.Now()
		c, err := net.Dial("tcp", e.listen)
		if err != nil {
			t.Fatalf("%s: cannot connect: %v", a.name, err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(a.raw(t))
		// The core answers with a refusal or hangs up at once: it never
		// reads a refused body, nor waits for one.
		io.Copy(io.Discard, c)
		c.Close()
		if d := time.Since(begin); d > 3*time.Second {
			t.Fatalf("%s: the connection stayed open %v", a.name, d)
		}
		e.eventually(10*time.Second, a.name+" rejected in slurmctld's log", func() (bool, string) {
			return e.logMatches(`agent report rejected peer=\S+ reason=` + a.reason), "no reason=" + a.reason
		})
		if !e.c.Ping() {
			t.Fatalf("after %s: scontrol ping does not answer", a.name)
		}
	}

	// A replayed frame: the first copy is stored, the second refused.
	replay := reportFrame(t, clusterMunge, "abuse-replay")
	for i := 0; i < 2; i++ {
		c, err := net.Dial("tcp", e.listen)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(replay)
		ack, err := wire.ReadAck(c, 1<<20)
		c.Close()
		if err != nil {
			t.Fatalf("replay %d: %v", i, err)
		}
		if ok := i == 0; ack.OK != ok {
			t.Fatalf("replay %d: ack %+v", i, ack)
		}
	}
	e.eventually(10*time.Second, "the replay rejected in slurmctld's log", func() (bool, string) {
		return e.logMatches(`agent report rejected peer=\S+ reason=replayed_credential`), ""
	})

	// A flood of garbage connections, then a new job must still run.
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				c, err := net.Dial("tcp", e.listen)
				if err != nil {
					continue
				}
				c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
				io.Copy(io.Discard, c)
				c.Close()
			}
		}()
	}
	second := e.submit("-J", "after-abuse", "--wrap", "sleep 1")
	wg.Wait()
	e.waitState(job, "COMPLETED", 60*time.Second)
	e.waitState(second, "COMPLETED", 60*time.Second)
	if !e.c.Ping() {
		t.Fatal("scontrol ping does not answer after the abuse")
	}

	// Nothing the attacks sent was stored, and the port still works.
	for _, m := range []string{"abuse-version", "abuse-absent", "abuse-forged", "abuse-flipped", "abuse-digest"} {
		if n := e.profileCount(m); n != 0 {
			t.Fatalf("%d rows of %s were stored", n, m)
		}
	}
	if n := e.profileCount("abuse-replay"); n != 1 {
		t.Fatalf("%d rows of the replayed report, want 1", n)
	}
	out := e.profile("synth-after-abuse")
	if !strings.Contains(out, "delivered to the controller") || e.profileCount("synth-after-abuse") != 1 {
		t.Fatalf("a real profile after the abuse:\n%s", out)
	}
}
