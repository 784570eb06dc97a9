package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lachesis-sched/lachesis/internal/protocol/munge"
	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// ErrProfileDemo is wrapped by the profiling demo's own errors.
var ErrProfileDemo = errors.New("profile demo")

// TrainRegex reads etc/demo/train_image.py's throughput lines
// ("step 120 loss 2.231 | 141.2 samples/s").
const TrainRegex = `([0-9]+(?:\.[0-9]+)?) samples/s`

// ProfileDemo is `make demo-profile`: a real PyTorch training job profiled
// through the node agent, its profile stored by the controller, and a plain
// sbatch of the same model sized from it. It must run as root (Slurm's
// daemons); the training job runs as User.
type ProfileDemo struct {
	Root string // repository root
	Dir  string // cluster directory; short (it holds the agent's unix socket)
	// Bin holds lachesis-node-agent and lachesis-profiler as built; they
	// are copied under Dir, where the user can run them.
	Bin   string
	User  string // the unprivileged user who profiles and submits
	Model string // model key (--comment=model=...)
	// PointSeconds is how long each CPU count of the sweep runs.
	PointSeconds int
	// JobSteps bounds the sbatch'd training run.
	JobSteps int
	Python   string // interpreter for etc/demo/train_image.py
	PNG      string // where the throughput chart goes
	Out      io.Writer
	// Stdout and Stderr receive the profiler CLI's own output unchanged,
	// so that its progress bar is drawn when they are a terminal.
	Stdout, Stderr *os.File
}

// Validate reports what is wrong with d's settings before anything starts.
func (d ProfileDemo) Validate() error {
	switch {
	case d.Root == "" || d.Dir == "" || d.Bin == "":
		return fmt.Errorf("%w: Root, Dir and Bin are required", ErrProfileDemo)
	case d.User == "" || d.User == "root":
		return fmt.Errorf("%w: the workload must run as an unprivileged user, not %q", ErrProfileDemo, d.User)
	case d.Model == "" || strings.ContainsAny(d.Model, " \t\n,="):
		return fmt.Errorf("%w: model %q must be one word (it goes into --comment=model=)", ErrProfileDemo, d.Model)
	case d.PointSeconds < 10:
		// The first 30% of a point is warm-up, and importing torch and
		// starting the loader's workers takes several seconds.
		return fmt.Errorf("%w: %d s per sweep point leaves no time after the import of torch; use 10 or more", ErrProfileDemo, d.PointSeconds)
	case d.JobSteps < 1:
		return fmt.Errorf("%w: the sbatch'd job needs at least one step, got %d", ErrProfileDemo, d.JobSteps)
	case len(d.Dir) > 60:
		return fmt.Errorf("%w: %s is too long for the agent's unix socket under it", ErrProfileDemo, d.Dir)
	}
	return nil
}

// work is the user's directory: the script, its dataset, the job's output.
func (d ProfileDemo) work() string { return filepath.Join(d.Dir, "work") }

func (d ProfileDemo) script() string { return filepath.Join(d.work(), "train_image.py") }

func (d ProfileDemo) data() string { return filepath.Join(d.work(), "data") }

func (d ProfileDemo) agentSocket() string { return filepath.Join(d.Dir, "agent.sock") }

// bin is where the commands are copied to.
func (d ProfileDemo) bin() string { return filepath.Join(d.Dir, "bin") }

// commands are the programs the demo runs from bin().
var commands = []string{"lachesis-node-agent", "lachesis-profiler"}

// profileArgs is the `lachesis-profiler profile` command line the user runs.
// It submits its own job (srun) and sweeps inside it; --exclusive gives
// that job every CPU of the node to sweep over.
func (d ProfileDemo) profileArgs() []string {
	return []string{
		filepath.Join(d.bin(), "lachesis-profiler"), "profile",
		"--agent-socket", d.agentSocket(),
		"--srun-args", "--exclusive",
		"--model", d.Model,
		"--regex", TrainRegex,
		"--point-seconds", strconv.Itoa(d.PointSeconds),
		"--dataset", d.data(),
		"--", d.Python, d.script(), "--data", d.data(),
	}
}

// jobArgs is the plain sbatch of the same model: one GPU, its model named,
// and nothing about CPUs or memory, which Lachesis decides.
func (d ProfileDemo) jobArgs() []string {
	return []string{
		"sbatch", "--parsable", "-J", d.Model, "--gpus=1", "--comment=model=" + d.Model,
		"-o", filepath.Join(d.work(), "job-%j.out"), "-D", d.work(),
		"--wrap", fmt.Sprintf("%s %s --data %s --steps %d", d.Python, d.script(), d.data(), d.JobSteps),
	}
}

// asUser prefixes argv so that it runs as d.User.
func (d ProfileDemo) asUser(argv []string) []string {
	return append([]string{"runuser", "-u", d.User, "--"}, argv...)
}

// lachesisYAML is the controller's configuration: 1 s passes and a
// listener for the node agent.
func (d ProfileDemo) lachesisYAML(listen string) string {
	return fmt.Sprintf("pass_interval: 1\ndb_path: %s\nagent:\n  listen: %s\n",
		filepath.Join(d.Dir, "lachesis", "lachesis.db"), listen)
}

// agentYAML is the node agent's configuration for lnode1.
func (d ProfileDemo) agentYAML(listen, mungeSocket string) string {
	return fmt.Sprintf("controller: %s\nmunge_socket: %s\nspool: %s\nsocket: %s\nnode: lnode1\n",
		listen, mungeSocket, filepath.Join(d.Dir, "agent-spool", "spool.db"), d.agentSocket())
}

// Run runs the whole demo and stops every daemon it started.
func (d ProfileDemo) Run(ctx context.Context) (err error) {
	if err := d.Validate(); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: run it as root (it starts Slurm's daemons and the node agent)", ErrProfileDemo)
	}
	say := func(format string, a ...any) { fmt.Fprintf(d.Out, "\n== "+format+"\n", a...) }
	u, err := ensureUser(d.User)
	if err != nil {
		return err
	}
	if err := d.prepareWork(u); err != nil {
		return err
	}
	say("Writing the synthetic dataset (JPEGs; the DataLoader decodes and augments them) as %s", d.User)
	if err := d.runUser(ctx, d.Python, d.script(), "--make-data", "--data", d.data()); err != nil {
		return err
	}

	listen, err := freeTCPAddr()
	if err != nil {
		return err
	}
	fragment, err := os.ReadFile(filepath.Join(d.Root, "etc", "slurm.conf.lachesis"))
	if err != nil {
		return err
	}
	tree, err := slurmcluster.BuildTree(d.Root)
	if err != nil {
		return err
	}
	cpus := runtime.NumCPU()
	say("Starting a loopback Slurm cluster with Lachesis: 1 node, %d CPUs (this machine's), 2 GPUs, 8000 MB", cpus)
	os.RemoveAll(filepath.Join(d.Dir, "lachesis"))
	c, err := slurmcluster.Up(ctx, d.Root, slurmcluster.Options{
		Dir: d.Dir, Nodes: 1, GPUsPerNode: 2, CPUsPerNode: cpus, MemPerNode: 8000,
		PluginDir:    filepath.Join(tree, "plugins"),
		LachesisYAML: d.lachesisYAML(listen),
		// task/affinity binds a job to the CPUs it is given, so the CPUs
		// Lachesis sizes are the CPUs the job's DataLoader sees.
		ExtraConf: slurmcluster.OverrideConf(string(fragment), "TaskPlugin=task/affinity"),
	})
	if c != nil {
		defer func() {
			if err != nil {
				fmt.Fprintln(d.Out, c.Logs())
			}
			if derr := c.Down(); derr != nil && err == nil {
				err = derr
			}
			fmt.Fprintln(d.Out, "\n== Cluster stopped.")
		}()
	}
	if err != nil {
		return err
	}

	stopAgent, err := d.startAgent(ctx, listen, mungeSocketOf(c.Conf), c.Conf)
	if err != nil {
		return err
	}
	defer stopAgent()

	say("Profiling %s through the node agent, as %s, in a job of theirs (%d s per CPU count):\n$ lachesis-profiler profile --srun-args --exclusive --model %s --regex '%s' --point-seconds %d --dataset data -- %s train_image.py --data data",
		d.Model, d.User, d.PointSeconds, d.Model, TrainRegex, d.PointSeconds, d.Python)
	if err := d.runCLI(ctx, c, true, d.profileArgs()...); err != nil {
		return err
	}

	say("What the controller stored:\n$ lachesis-profiler show %s --plot %s", d.Model, d.PNG)
	if err := d.runCLI(ctx, c, false, filepath.Join(d.bin(), "lachesis-profiler"), "show", d.Model, "--plot", d.PNG); err != nil {
		return err
	}
	if err := d.showLog(c); err != nil {
		return err
	}

	job := d.jobArgs()
	say("A plain sbatch of the same model, as %s:\n$ %s", d.User, shellQuote(job))
	out, err := c.Run("runuser", d.asUser(job)[1:]...)
	if err != nil {
		return err
	}
	id64, err := strconv.ParseUint(strings.SplitN(strings.TrimSpace(out), ";", 2)[0], 10, 32)
	if err != nil {
		return fmt.Errorf("%w: sbatch said %q", ErrProfileDemo, out)
	}
	id := uint32(id64)
	return d.followJob(ctx, c, id)
}

// prepareWork makes the user's directory and copies the training script
// into it: the repository need not be readable by the user.
func (d ProfileDemo) prepareWork(u *user.User) error {
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return err
	}
	os.Chmod(d.Dir, 0o755) //nolint:errcheck // MkdirAll left it as it was
	if err := os.MkdirAll(d.work(), 0o755); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(d.Root, "etc", "demo", "train_image.py"), d.script(), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(d.bin(), 0o755); err != nil {
		return err
	}
	for _, name := range commands {
		if err := copyFile(filepath.Join(d.Bin, name), filepath.Join(d.bin(), name), 0o755); err != nil {
			return err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(d.work(), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// userEnv is the environment of the user's commands: a home and a TMPDIR
// they own (the demo user has no home), and the cluster's slurm.conf.
func (d ProfileDemo) userEnv(conf string) []string {
	env := []string{"HOME=" + d.work(), "TMPDIR=" + d.work(), "PATH=" + os.Getenv("PATH")}
	if conf != "" {
		env = append(env, "SLURM_CONF="+conf)
	}
	return env
}

func (d ProfileDemo) runUser(ctx context.Context, argv ...string) error {
	full := d.asUser(argv)
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Dir, cmd.Env = d.work(), d.userEnv("")
	cmd.Stdout, cmd.Stderr = d.Out, d.Out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrProfileDemo, strings.Join(argv, " "), err)
	}
	return nil
}

// runCLI runs a lachesis-profiler command with the terminal as its output,
// as the user when asUser (profile) or as root (show reads the
// controller's database).
func (d ProfileDemo) runCLI(ctx context.Context, c *slurmcluster.Cluster, asUser bool, argv ...string) error {
	env := d.userEnv(c.Conf)
	if asUser {
		argv = d.asUser(argv)
	} else {
		env = append(os.Environ(), "SLURM_CONF="+c.Conf)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = d.work(), env
	cmd.Stdout, cmd.Stderr = d.Stdout, d.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrProfileDemo, filepath.Base(argv[0]), err)
	}
	return nil
}

// showLog prints slurmctld's lines about the profile's arrival.
func (d ProfileDemo) showLog(c *slurmcluster.Cluster) error {
	fmt.Fprintln(d.Out, "\nslurmctld's log:")
	n := 0
	for _, l := range strings.Split(c.ControllerLog(), "\n") {
		if strings.Contains(l, "profile stored model="+d.Model) {
			fmt.Fprintln(d.Out, "  "+strings.TrimSpace(l))
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("%w: slurmctld's log does not show profile %s arriving", ErrProfileDemo, d.Model)
	}
	return nil
}

// followJob shows what the job was given and, once it ends, what it did.
func (d ProfileDemo) followJob(ctx context.Context, c *slurmcluster.Cluster, id uint32) error {
	var det slurmcluster.JobDetail
	deadline := time.Now().Add(10 * time.Minute)
	shown := false
	for {
		var err error
		if det, err = c.ShowJob(id); err != nil {
			return err
		}
		if !shown && det.State != "PENDING" {
			fmt.Fprintf(d.Out, "\n$ scontrol show job %d   (the fields Lachesis set)\n", id)
			for _, k := range []string{"JobState", "NumCPUs", "CpusPerTres", "MemPerTres", "TresPerJob", "AdminComment"} {
				fmt.Fprintf(d.Out, "  %s=%s\n", k, det.Fields[k])
			}
			shown = true
		}
		if done(det.State) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: job %d still %s after 10 minutes", ErrProfileDemo, id, det.State)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	out, _ := os.ReadFile(filepath.Join(d.work(), fmt.Sprintf("job-%d.out", id)))
	fmt.Fprintf(d.Out, "\nJob %d %s; its output (first line, last 3):\n%s", id, det.State, indent(headTail(string(out), 3)))
	if det.State != "COMPLETED" {
		return fmt.Errorf("%w: job %d ended %s", ErrProfileDemo, id, det.State)
	}
	return nil
}

func done(state string) bool {
	switch state {
	case "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY":
		return true
	}
	return false
}

// startAgent starts lachesis-node-agent and waits for its socket; the
// returned func stops it.
func (d ProfileDemo) startAgent(ctx context.Context, listen, mungeSocket, slurmConf string) (func(), error) {
	return startNodeAgent(ctx, nodeAgent{Bin: d.bin(), Dir: d.Dir, YAML: d.agentYAML(listen, mungeSocket),
		Socket: d.agentSocket(), SlurmConf: slurmConf, Out: d.Out})
}

// ErrNodeAgent: the demo's node agent did not start.
var ErrNodeAgent = errors.New("demo node agent")

// nodeAgent is a lachesis-node-agent the demo runs beside its cluster.
type nodeAgent struct {
	Bin       string // holds lachesis-node-agent and lachesis-profiler
	Dir       string // the cluster's directory: node-agent.yaml, agent-spool/, log/node-agent.log
	YAML      string // node-agent.yaml, whose spool is under Dir/agent-spool
	Socket    string // the agent's unix socket, as YAML names it
	SlurmConf string
	Out       io.Writer // where "up" and "stopped" are said
}

// startNodeAgent starts a and waits for its socket to answer
// `lachesis-profiler status`; the returned func stops it.
func startNodeAgent(ctx context.Context, a nodeAgent) (func(), error) {
	cfg := filepath.Join(a.Dir, "node-agent.yaml")
	if err := os.WriteFile(cfg, []byte(a.YAML), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(filepath.Join(a.Dir, "agent-spool"))
	logPath := filepath.Join(a.Dir, "log", "node-agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(a.Bin, "lachesis-node-agent"), "-config", cfg)
	// The agent asks this cluster's Slurm (squeue) about its callers' jobs.
	cmd.Env = append(os.Environ(), "SLURM_CONF="+a.SlurmConf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }() //nolint:errcheck // its log says why
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may have exited
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill() //nolint:errcheck
			<-exited
		}
		fmt.Fprintln(a.Out, "\n== Node agent stopped.")
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		st := exec.CommandContext(ctx, filepath.Join(a.Bin, "lachesis-profiler"), "status", "--agent-socket", a.Socket)
		if out, err := st.CombinedOutput(); err == nil {
			fmt.Fprintf(a.Out, "\n== Node agent up:\n%s", indent(string(out)))
			return stop, nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%w: it exited:\n%s", ErrNodeAgent, b)
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%w: its socket did not answer in 30 s", ErrNodeAgent)
		}
	}
}

// ensureUser creates the unprivileged demo user if it is missing.
func ensureUser(name string) (*user.User, error) {
	if u, err := user.Lookup(name); err == nil {
		return u, nil
	}
	out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
		"--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%w: useradd %s: %v: %s", ErrProfileDemo, name, err, out)
	}
	return user.Lookup(name)
}

func freeTCPAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// mungeSocketOf reads munged's socket from slurm.conf's AuthInfo line, as
// slurmctld does.
func mungeSocketOf(conf string) string {
	b, _ := os.ReadFile(conf)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "AuthInfo="); ok {
			return munge.SocketFromAuthInfo(v)
		}
	}
	return munge.DefaultSocket
}

// copyFile replaces dst with src's bytes (a fresh inode, so a running
// copy of an old binary is not overwritten under it).
func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func shellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t'\"$*?%;|&<>()") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// headTail is s's first line (the script says how many CPUs it got) and
// its last n lines (its throughput on them).
func headTail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n+1 {
		ls = append(ls[:1:1], ls[len(ls)-n:]...)
	}
	return strings.Join(ls, "\n")
}
