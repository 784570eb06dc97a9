package slurmcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrCluster is wrapped by every error from this package.
var ErrCluster = errors.New("slurm cluster")

// Options shape a cluster. Zero values take scripts/cluster.sh's defaults.
type Options struct {
	Dir         string // where everything lives; must be reachable by user munge
	Nodes       int
	GPUsPerNode int
	CPUsPerNode int
	MemPerNode  int // MB
	PortBase    int
	Priority    string // PriorityType, e.g. "priority/tiresias"
	Preempt     string // PreemptType
	JobSubmit   string // JobSubmitPlugins
	PluginDir   string // prepended to Slurm's PluginDir
	// LachesisYAML is written to etc/lachesis.yaml when non-empty.
	LachesisYAML string
	// ExtraConf lines are appended to slurm.conf (same keys replace).
	ExtraConf string
	// Accounting: "" (none) or "slurmdbd" (a private MariaDB and slurmdbd,
	// so sacct works and gres/gpu is an accounted TRES).
	Accounting string
	// GPUTypes: typed GPUs in node groups, e.g. "a:2,b:2" (lnode1-2 get
	// Gres=gpu:a:N and Feature=gpu_a, lnode3-4 type b); "" = untyped.
	GPUTypes string
	// Cgroups: jobs get cgroups (proctrack/cgroup, task/cgroup), see
	// scripts/cluster.sh's LACHESIS_CGROUPS.
	Cgroups bool
	// ShardsPerGPU > 0 adds gres/shard, that many on each fake GPU, so
	// jobs can share a GPU (scripts/cluster.sh's LACHESIS_SHARDS_PER_GPU).
	ShardsPerGPU int
	// MPSPerNode > 0 adds gres/mps, that count on each node's first fake
	// GPU, so jobs can share it with CUDA MPS (scripts/cluster.sh's
	// LACHESIS_MPS_PER_NODE; not with ShardsPerGPU).
	MPSPerNode int
	// LLSharedGres: SelectTypeParameters gets 23.11's LL_SHARED_GRES
	// (shards from the least loaded GPU first; LACHESIS_LL_SHARED_GRES,
	// Slurm 23.11 or later).
	LLSharedGres bool
	// GresCores: gres.conf ties the GPUs to the node's cores, so the
	// node's Gres carries a socket suffix (LACHESIS_GRES_CORES).
	GresCores bool
	// TopologyConf, when non-empty, is written to etc/topology.conf, with
	// TopologyPlugin=topology/tree (scripts/cluster.sh's
	// LACHESIS_TOPOLOGY_CONF).
	TopologyConf string
}

// Cluster is a running loopback cluster.
type Cluster struct {
	Root string // repository root (holds scripts/cluster.sh)
	Dir  string
	Conf string // slurm.conf
	env  []string
}

// RepoRoot finds the repository root by walking up from dir to go.mod.
func RepoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "scripts", "cluster.sh")); err == nil {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("%w: no scripts/cluster.sh above %s", ErrCluster, dir)
		}
	}
}

// BuildTree returns the absolute path of the build tree of the Slurm
// release this machine runs (build/slurm-22.05, build/slurm-24.11), which
// holds plugins/, bin/ and deb/: LACHESIS_BUILD when set (relative to
// root unless absolute; the Makefile exports it), else what
// scripts/releases.sh derives from the installed slurmctld, so Go and make
// follow one rule and the builds for both releases live in one checkout.
func BuildTree(root string) (string, error) {
	dir := os.Getenv("LACHESIS_BUILD")
	if dir == "" {
		var err error
		if dir, err = releases(root, "build-dir"); err != nil {
			return "", err
		}
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	return filepath.Clean(dir), nil
}

// SlurmRelease returns the major.minor release of the installed Slurm
// ("22.05", "24.11"), as scripts/releases.sh reads it.
func SlurmRelease(root string) (string, error) {
	return releases(root, "slurm")
}

// releases runs scripts/releases.sh verb, the one home of the release rules.
func releases(root, verb string) (string, error) {
	out, err := exec.Command("bash", filepath.Join(root, "scripts", "releases.sh"), verb).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("%w: scripts/releases.sh %s: %v", ErrCluster, verb, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Up starts a cluster (stopping any previous one in the same Dir).
func Up(ctx context.Context, root string, o Options) (*Cluster, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("%w: Options.Dir is required", ErrCluster)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCluster, err)
	}
	c := &Cluster{Root: root, Dir: o.Dir, Conf: filepath.Join(o.Dir, "etc", "slurm.conf")}
	env := map[string]string{
		"LACHESIS_CLUSTER_DIR":   o.Dir,
		"LACHESIS_PRIORITY_TYPE": o.Priority,
		"LACHESIS_PREEMPT_TYPE":  o.Preempt,
		"LACHESIS_JOB_SUBMIT":    o.JobSubmit,
		"LACHESIS_PLUGIN_DIR":    o.PluginDir,
		"LACHESIS_ACCOUNTING":    o.Accounting,
		"LACHESIS_GPU_TYPES":     o.GPUTypes,
	}
	if o.Cgroups {
		env["LACHESIS_CGROUPS"] = "1"
	}
	if o.GresCores {
		env["LACHESIS_GRES_CORES"] = "1"
	}
	if o.LLSharedGres {
		env["LACHESIS_LL_SHARED_GRES"] = "1"
	}
	for k, v := range map[string]int{
		"LACHESIS_NODES": o.Nodes, "LACHESIS_GPUS_PER_NODE": o.GPUsPerNode,
		"LACHESIS_CPUS_PER_NODE": o.CPUsPerNode, "LACHESIS_MEM_PER_NODE": o.MemPerNode,
		"LACHESIS_PORT_BASE": o.PortBase, "LACHESIS_SHARDS_PER_GPU": o.ShardsPerGPU,
		"LACHESIS_MPS_PER_NODE": o.MPSPerNode,
	} {
		if v != 0 {
			env[k] = strconv.Itoa(v)
		}
	}
	if o.LachesisYAML != "" {
		p := filepath.Join(o.Dir, "lachesis.src.yaml")
		if err := os.WriteFile(p, []byte(o.LachesisYAML), 0o644); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCluster, err)
		}
		env["LACHESIS_CONFIG_SRC"] = p
	}
	if o.TopologyConf != "" {
		p := filepath.Join(o.Dir, "topology.src.conf")
		if err := os.WriteFile(p, []byte(o.TopologyConf), 0o644); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCluster, err)
		}
		env["LACHESIS_TOPOLOGY_CONF"] = p
	}
	if o.ExtraConf != "" {
		p := filepath.Join(o.Dir, "extra.conf")
		if err := os.WriteFile(p, []byte(o.ExtraConf), 0o644); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCluster, err)
		}
		env["LACHESIS_EXTRA_CONF"] = p
	}
	c.env = os.Environ()
	for k, v := range env {
		if v != "" {
			c.env = append(c.env, k+"="+v)
		}
	}
	c.env = append(c.env, "SLURM_CONF="+c.Conf)
	if out, err := c.script(ctx, "up"); err != nil {
		return c, fmt.Errorf("%w: up: %v\n%s", ErrCluster, err, out)
	}
	return c, nil
}

func (c *Cluster) script(ctx context.Context, verb string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(c.Root, "scripts", "cluster.sh"), verb)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Down stops every daemon of the cluster.
func (c *Cluster) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := c.script(ctx, "down"); err != nil {
		return fmt.Errorf("%w: down: %v\n%s", ErrCluster, err, out)
	}
	return nil
}

// Logs returns the tail of every daemon log (for failure reports).
func (c *Cluster) Logs() string {
	out, _ := c.script(context.Background(), "logs")
	return out
}

// Run runs a Slurm client command against this cluster.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s %s: %v: %s", ErrCluster, name,
			shorten(strings.Join(args, " ")), err, shorten(strings.TrimSpace(string(out))))
	}
	return string(out), nil
}

// RunAs runs a Slurm client command as the local user name (runuser), the
// way an ordinary user of the cluster runs it.
func (c *Cluster) RunAs(user, name string, args ...string) (string, error) {
	return c.Run("runuser", append([]string{"-u", user, "--", name}, args...)...)
}

// Submit runs sbatch with args and returns the job id.
func (c *Cluster) Submit(args ...string) (uint32, error) {
	return parseSbatch(c.Run("sbatch", append([]string{"--parsable"}, args...)...))
}

// SubmitAs is Submit as the local user name (RunAs). The job should name a
// working directory and output the user can write (-D, -o).
func (c *Cluster) SubmitAs(user string, args ...string) (uint32, error) {
	return parseSbatch(c.RunAs(user, "sbatch", append([]string{"--parsable"}, args...)...))
}

func parseSbatch(out string, err error) (uint32, error) {
	if err != nil {
		return 0, err
	}
	id, err := strconv.ParseUint(strings.SplitN(strings.TrimSpace(out), ";", 2)[0], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: sbatch said %q", ErrCluster, out)
	}
	return uint32(id), nil
}

// ControllerPID is slurmctld's pid, from its pid file.
func (c *Cluster) ControllerPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "run", "slurmctld.pid"))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrCluster, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// KillController kill -9s slurmctld, as a crash would.
func (c *Cluster) KillController() error {
	pid, err := c.ControllerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("%w: kill %d: %v", ErrCluster, pid, err)
	}
	// Dead once it is gone or a zombie (orphans wait for PID 1 to reap
	// them): its ports and files are free then, so a restart may follow.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !running(pid) {
			return nil
		}
	}
	return fmt.Errorf("%w: slurmctld pid %d still runs 10 s after SIGKILL", ErrCluster, pid)
}

// running reports whether pid is a live process, not a zombie (the state,
// in /proc/PID/stat, follows the parenthesised command name).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// JobStateSaved is when slurmctld last wrote its job state file (what a
// restart after a crash recovers jobs from); zero if it has not yet.
// slurmctld saves at most every 5 s, soon after a change that asks for a
// save (a submission, a requeue, a completion, jobs started).
func (c *Cluster) JobStateSaved() time.Time {
	fi, err := os.Stat(filepath.Join(c.Dir, "state", "job_state"))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// StopController shuts slurmctld down cleanly (`scontrol shutdown
// slurmctld`: it saves its state and closes its plugins) and waits for the
// process to exit.
func (c *Cluster) StopController() error {
	pid, err := c.ControllerPID()
	if err != nil {
		return err
	}
	if _, err := c.Run("scontrol", "shutdown", "slurmctld"); err != nil {
		return err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return nil
		}
	}
	return fmt.Errorf("%w: slurmctld (pid %d) still running 60 s after scontrol shutdown", ErrCluster, pid)
}

// RestartController starts slurmctld again on the same state.
func (c *Cluster) RestartController() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := c.script(ctx, "restart-ctld"); err != nil {
		return fmt.Errorf("%w: restart-ctld: %v\n%s", ErrCluster, err, out)
	}
	return nil
}

// WriteLachesisYAML replaces etc/lachesis.yaml (then call Reconfigure).
func (c *Cluster) WriteLachesisYAML(text string) error {
	return os.WriteFile(filepath.Join(c.Dir, "etc", "lachesis.yaml"), []byte(text), 0o644)
}

// Reconfigure runs `scontrol reconfigure`.
//
// It returns once the cluster serves again. Slurm 22.05 re-reads its
// configuration in place. From 24.05 a reconfigure starts a new slurmctld
// beside the running one, which logs "Relinquishing control to new
// slurmctld process" before it answers; the new one knows its nodes as
// UNKNOWN (no SlurmdStartTime) until each slurmd registers again, a fraction
// of a second later, and until then refuses any job that asks for GPUs as
// never runnable ("Requested node configuration is not available"; Slurm's
// own plugins alike). So after such a takeover Reconfigure waits, up to
// 60 s, until every node has registered with the new slurmctld.
func (c *Cluster) Reconfigure() error {
	before := len(c.ControllerLog())
	if _, err := c.Run("scontrol", "reconfigure"); err != nil {
		return err
	}
	if log := c.ControllerLog(); len(log) < before ||
		!strings.Contains(log[before:], "Relinquishing control to new slurmctld process") {
		return nil // re-read in place, or the takeover failed and the old one goes on
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		unregistered, err := c.unregisteredNodes()
		if err == nil && len(unregistered) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: after the reconfigure, nodes not registered with the new slurmctld within 60 s: %v (%v)", ErrCluster, unregistered, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// unregisteredNodes lists the nodes whose slurmd has not registered with
// slurmctld (no SlurmdStartTime, state UNKNOWN) or that do not respond.
func (c *Cluster) unregisteredNodes() ([]string, error) {
	out, err := c.Run("scontrol", "-o", "show", "nodes")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, line := range nonEmptyLines(out) {
		f := map[string]string{}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		state := f["State"]
		if f["SlurmdStartTime"] == "None" || strings.HasPrefix(state, "UNKNOWN") ||
			strings.Contains(state, "NOT_RESPONDING") {
			names = append(names, f["NodeName"]+" "+state)
		}
	}
	return names, nil
}

// ControllerLog returns slurmctld's whole log.
func (c *Cluster) ControllerLog() string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "log", "slurmctld.log"))
	return string(b)
}

// Ping reports whether slurmctld answers.
func (c *Cluster) Ping() bool {
	out, err := c.Run("scontrol", "ping")
	return err == nil && strings.Contains(out, "UP")
}

// shorten keeps error messages readable when arguments are huge.
func shorten(s string) string {
	const max = 300
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:max], len(s))
}

// OverrideConf returns a slurm.conf fragment with each "Key=value" of
// overrides replacing the fragment's lines for that key (keys compare
// case-insensitively, as Slurm's do). "Key=" with no value only removes
// the key.
func OverrideConf(fragment string, overrides ...string) string {
	keys := map[string]bool{}
	var add []string
	for _, o := range overrides {
		k, v, _ := strings.Cut(o, "=")
		keys[strings.ToLower(strings.TrimSpace(k))] = true
		if v != "" {
			add = append(add, o)
		}
	}
	var out []string
	for _, line := range strings.Split(fragment, "\n") {
		k, _, _ := strings.Cut(strings.TrimSpace(line), "=")
		if !keys[strings.ToLower(k)] {
			out = append(out, line)
		}
	}
	return strings.Join(append(out, add...), "\n") + "\n"
}
