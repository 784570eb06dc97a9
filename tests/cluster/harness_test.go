// Package cluster_test runs Lachesis inside a real slurmctld: a loopback
// cluster of real slurmctld/slurmd/munge started by scripts/cluster.sh, with
// the plugins built by `make build`. Everything is observed the way an admin
// would see it: squeue, sprio, scontrol, slurmctld's log and the ledger.
//
// These tests need root and Slurm; without them they fail, never skip.
package cluster_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lachesis-sched/lachesis/internal/controller/ledger"
	"github.com/lachesis-sched/lachesis/internal/controller/profilestore"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
	"github.com/lachesis-sched/lachesis/profile"
)

var repoRoot string

// buildTree is the build tree of the Slurm release under test
// (build/slurm-22.05 or build/slurm-24.11, slurmcluster.BuildTree): its
// plugins/, bin/ and deb/.
var buildTree string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the cluster tests must run as root (they start slurmctld, slurmd and munged)")
		os.Exit(1)
	}
	wd, _ := os.Getwd()
	root, err := slurmcluster.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	tree, err := slurmcluster.BuildTree(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	for _, so := range []string{"liblachesis_core.so", "priority_tiresias.so", "preempt_tiresias.so"} {
		if _, err := os.Stat(filepath.Join(tree, "plugins", so)); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %s is not built in %s; run `make build` (make test-cluster does)\n", so, tree)
			os.Exit(1)
		}
	}
	release, err := slurmcluster.SlurmRelease(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	repoRoot, buildTree, slurmRelease = root, tree, release
	staged, err := stagePlugins(tree)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: staging the plugins where every user may read them:", err)
		os.Exit(1)
	}
	pluginDir = staged
	code := m.Run()
	os.RemoveAll(staged)
	os.Exit(code)
}

// pluginDir is the build tree's plugins/ as the clusters load them: a copy
// that every user may read (stagePlugins).
var pluginDir string

// stagePlugins copies tree's plugins/ into a directory of this test
// binary's under testDirRoot, readable by every user. sbatch, run as the
// test user, reads slurm.conf's PluginDir, and a checkout a newcomer clones
// as root into /root (mode 0700) is readable by root alone: the plugins
// there would fail every test user's command ("PluginDir: Permission
// denied").
func stagePlugins(tree string) (string, error) {
	if err := os.MkdirAll(testDirRoot, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(testDirRoot, 0o755); err != nil {
		return "", err
	}
	dst, err := os.MkdirTemp(testDirRoot, "plugins-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dst, 0o755); err != nil {
		return "", err
	}
	src := filepath.Join(tree, "plugins")
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, ent := range entries {
		if !ent.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, ent.Name()))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, ent.Name()), b, 0o755); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// testDirRoot holds one directory per test cluster; make test-cluster
// tears down whatever is left there if the test binary dies.
var testDirRoot = envOr("LACHESIS_TEST_DIR", "/tmp/lachesis-test")

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// tiresiasYAML is a lachesis.yaml for fast tests: 1 s passes.
func tiresiasYAML(dir string, extra string) string {
	return fmt.Sprintf("pass_interval: 1\nlog_level: debug\ndb_path: %s\n%s",
		filepath.Join(dir, "lachesis", "lachesis.db"), extra)
}

type env struct {
	t   *testing.T
	c   *slurmcluster.Cluster
	dir string
}

// shape is a test cluster's hardware; zero fields take scripts/cluster.sh's
// defaults (8 CPUs, 16000 MB per node).
type shape struct {
	Nodes, GPUs, CPUs, MemMB int
	Accounting               string // "" or "slurmdbd"
	// SystemPlugins: PluginDir is Slurm's own directory alone, where the
	// lachesis-slurmctld package installs the plugins, not build/plugins.
	SystemPlugins bool
	// GPUTypes: typed GPUs in node groups, e.g. "b:2,a:2" (see
	// scripts/cluster.sh's LACHESIS_GPU_TYPES); "" = untyped.
	GPUTypes string
	// Cgroups: jobs get cgroups, as on a production node.
	Cgroups bool
	// ShardsPerGPU > 0: gres/shard on every GPU, so jobs can share one.
	ShardsPerGPU int
	// MPSPerNode > 0: gres/mps on each node's first GPU (not with shards).
	MPSPerNode int
	// LLSharedGres: Slurm 23.11's LL_SHARED_GRES (shards from the least
	// loaded GPU first).
	LLSharedGres bool
	// GresCores: gres.conf names the GPUs' cores, so slurmctld writes
	// each node's Gres with a socket suffix ("gpu:1(S:0)").
	GresCores bool
	// TopologyConf: topology/tree with this topology.conf
	// (scripts/cluster.sh's LACHESIS_TOPOLOGY_CONF).
	TopologyConf string
}

// startCluster brings up a cluster of nodes × 4 GPUs with the shipped
// etc/slurm.conf.lachesis fragment and the given lachesis.yaml text. Like
// every start helper, it marks the test parallel unless it runs alone
// (parallel_test.go).
func startCluster(t *testing.T, nodes int, yaml string, extraConf ...string) *env {
	t.Helper()
	return startShapedCluster(t, shape{Nodes: nodes, GPUs: 4}, yaml, extraConf...)
}

func startShapedCluster(t *testing.T, hw shape, yaml string, extraConf ...string) *env {
	t.Helper()
	return startSeededCluster(t, hw, yaml, nil, extraConf...)
}

// socketTail is the longest path slurmstepd puts under a cluster's
// directory for a unix socket (/lnode12/lnode12_JOBID.STEPID, a 7-digit job
// id and a 10-digit step id), and maxSocketPath the kernel's bound on a
// unix socket's path (sun_path, 108 bytes with its NUL).
const (
	socketTail    = 35
	maxSocketPath = 107
)

// clusterDir is t's cluster directory under testDirRoot: the test's name,
// or, where that would make slurmstepd's sockets longer than a unix socket
// may be ("Unix socket path ... is too long", the job's launch fails), its
// start and a hash of the whole name.
func clusterDir(t *testing.T) string {
	name := strings.ReplaceAll(t.Name(), "/", "_")
	room := max(16, maxSocketPath-socketTail-len(testDirRoot)-1)
	if len(name) > room {
		sum := sha256.Sum256([]byte(name))
		name = name[:room-9] + "-" + hex.EncodeToString(sum[:4])
	}
	return filepath.Join(testDirRoot, name)
}

// startSeededCluster is startShapedCluster with profiles stored in the
// controller's database before slurmctld starts, as if node agents had
// reported them earlier and an admin had published them.
func startSeededCluster(t *testing.T, hw shape, yaml string, profiles []profile.Record, extraConf ...string) *env {
	t.Helper()
	parallelUnlessAlone(t)
	dir := clusterDir(t)
	os.RemoveAll(dir)
	if len(profiles) > 0 {
		// The cluster directory must stay searchable by user munge.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		store, err := profilestore.Open(filepath.Join(dir, "lachesis", "lachesis.db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range profiles {
			if _, err := store.Put(rec); err != nil {
				t.Fatal(err)
			}
			// Published, so it sizes every user's jobs of its model.
			if _, err := store.Publish(rec.Model, rec.ID); err != nil {
				t.Fatal(err)
			}
		}
		store.Close()
	}
	fragment, err := os.ReadFile(filepath.Join(repoRoot, "etc", "slurm.conf.lachesis"))
	if err != nil {
		t.Fatal(err)
	}
	plugins := pluginDir
	if hw.SystemPlugins {
		plugins = "" // scripts/cluster.sh: Slurm's own PluginDir only
	}
	opts := slurmcluster.Options{
		Dir:          dir,
		PortBase:     reservePortBlock(t),
		Nodes:        hw.Nodes,
		GPUsPerNode:  hw.GPUs,
		CPUsPerNode:  hw.CPUs,
		MemPerNode:   hw.MemMB,
		Accounting:   hw.Accounting,
		GPUTypes:     hw.GPUTypes,
		Cgroups:      hw.Cgroups,
		ShardsPerGPU: hw.ShardsPerGPU,
		MPSPerNode:   hw.MPSPerNode,
		GresCores:    hw.GresCores,
		TopologyConf: hw.TopologyConf,
		LLSharedGres: hw.LLSharedGres,
		PluginDir:    plugins,
		LachesisYAML: tiresiasYAML(dir, yaml),
		ExtraConf:    slurmcluster.OverrideConf(string(fragment), extraConf...),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := slurmcluster.Up(ctx, repoRoot, opts)
	e := &env{t: t, c: c, dir: dir}
	t.Cleanup(func() {
		if t.Failed() && c != nil {
			t.Logf("cluster logs:\n%s", c.Logs())
		}
		if c != nil {
			if err := c.Down(); err != nil {
				t.Errorf("stopping the cluster: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("cluster did not come up: %v", err)
	}
	return e
}

func (e *env) submit(args ...string) uint32 {
	e.t.Helper()
	id, err := e.c.Submit(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// eventually polls cond every 500 ms until it holds or timeout passes.
func (e *env) eventually(timeout time.Duration, what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		time.Sleep(500 * time.Millisecond)
	}
	e.t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
}

func (e *env) jobs() map[uint32]slurmcluster.Job {
	e.t.Helper()
	j, err := e.c.Jobs()
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *env) prio() map[uint32]slurmcluster.Prio {
	e.t.Helper()
	p, err := e.c.Priorities()
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) waitState(id uint32, state string, timeout time.Duration) {
	e.t.Helper()
	e.eventually(timeout, fmt.Sprintf("job %d %s", id, state), func() (bool, string) {
		j := e.jobs()[id]
		return j.State == state, fmt.Sprintf("%+v", j)
	})
}

// waitQueue waits until sprio shows the job in the given Tiresias queue.
func (e *env) waitQueue(id uint32, queue int64, timeout time.Duration) slurmcluster.Prio {
	e.t.Helper()
	var p slurmcluster.Prio
	e.eventually(timeout, fmt.Sprintf("job %d in queue %d (sprio)", id, queue), func() (bool, string) {
		p = e.prio()[id]
		return p.ID == id && p.Queue == queue, fmt.Sprintf("%+v", p)
	})
	return p
}

func (e *env) ledgerRecord(id uint32) (ledger.Record, bool) {
	e.t.Helper()
	store, err := ledger.OpenReadOnly(filepath.Join(e.dir, "lachesis", "lachesis.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer store.Close()
	r, ok, err := store.Get(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return r, ok
}

func (e *env) logMatches(pattern string) bool {
	return regexp.MustCompile(pattern).MatchString(e.c.ControllerLog())
}

// waitPasses waits until slurmctld's log shows n Lachesis passes after the
// call (priority/tiresias logs each one at SlurmctldDebug=verbose).
func (e *env) waitPasses(n int) {
	e.t.Helper()
	from := len(e.c.ControllerLog())
	e.eventually(30*time.Second, fmt.Sprintf("%d Lachesis passes", n), func() (bool, string) {
		log := e.c.ControllerLog()
		if len(log) < from { // a new log file
			from = 0
		}
		got := len(slurmcluster.PassTimes(log[from:]))
		return got >= n, fmt.Sprintf("%d passes", got)
	})
}

// waitJobStateSaved waits until slurmctld has written its job state after
// since, so a kill -9 leaves behind what it knew then. Call it after a
// change that asks for a save (a submission, a requeue, a job's end or
// start); slurmctld writes within 5 s of one.
func (e *env) waitJobStateSaved(since time.Time) {
	e.t.Helper()
	e.eventually(30*time.Second, "slurmctld to save its job state", func() (bool, string) {
		saved := e.c.JobStateSaved()
		return saved.After(since), fmt.Sprintf("last saved %v, want after %v", saved.Format(time.StampMilli), since.Format(time.StampMilli))
	})
}
