package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lachesis-sched/lachesis/internal/rigs/slurmcluster"
)

// Scenario is one policy's run of the workload.
type Scenario struct {
	Label    string // shown in tables
	Priority string // PriorityType
	Preempt  string // PreemptType
	Extra    string // slurm.conf lines
	YAML     string // lachesis.yaml
	// ShowQueues reads Tiresias queues and service from sprio (only
	// meaningful under priority/tiresias).
	ShowQueues bool
	JobSubmit  string // JobSubmitPlugins
	// Prepare runs before the cluster starts (e.g. to seed profiles).
	Prepare func(clusterDir string) error
	// SubmitArgs adds sbatch options for a job; Speeds gives its model's
	// speed table for scripts/demo-train.sh ("" = the share's speed).
	SubmitArgs func(Job) []string
	Speeds     func(Job) string
	// Command, if set, replaces the GPU request and the job's script
	// (--gpus and scripts/demo-train.sh): the sbatch options and the
	// --wrap of job j, which checkpoints into ckpt.
	Command func(j Job, ckpt string) []string
	// Start, if set, runs once the cluster is up (e.g. the node agent);
	// the func it returns runs before the cluster stops.
	Start func(ctx context.Context, c *slurmcluster.Cluster) (func(), error)
	// Sample, if set, is called at every poll with the jobs' states.
	Sample func(out []Outcome, states map[uint32]slurmcluster.Job)
}

// Outcome is what happened to one job in one scenario.
type Outcome struct {
	Job      Job
	ID       uint32
	Submit   time.Time
	End      time.Time
	Restarts int
	// CPUsPerGPU the job was given (read when it first ran).
	CPUsPerGPU int
}

// JCT is the job completion time: submission to end, across requeues.
func (o Outcome) JCT() time.Duration { return o.End.Sub(o.Submit) }

// Runner runs scenarios on one cluster shape.
type Runner struct {
	Root      string // repository root
	Dir       string // cluster directory
	Nodes     int
	GPUs      int
	Out       io.Writer
	Live      bool // redraw a live table (a terminal); else print a line now and then
	PollEvery time.Duration
	CPUs      int // per node; 0 = the cluster script's default
	MemMB     int // per node; 0 = the cluster script's default
	PortBase  int // 0 = the cluster script's default (make demo's 16817)
	// Finished, if set, is called with the cluster after every job has
	// ended and before the cluster stops (e.g. to read slurmctld's log).
	Finished func(c *slurmcluster.Cluster) error
	// Cgroups and ShardsPerGPU: see slurmcluster.Options.
	Cgroups      bool
	ShardsPerGPU int
}

// Run executes the workload under s and returns each job's outcome.
func (r *Runner) Run(ctx context.Context, s Scenario, jobs []Job) ([]Outcome, error) {
	os.RemoveAll(filepath.Join(r.Dir, "lachesis"))
	if s.Prepare != nil {
		if err := s.Prepare(r.Dir); err != nil {
			return nil, err
		}
	}
	tree, err := slurmcluster.BuildTree(r.Root)
	if err != nil {
		return nil, err
	}
	c, err := slurmcluster.Up(ctx, r.Root, slurmcluster.Options{
		Dir: r.Dir, Nodes: r.Nodes, GPUsPerNode: r.GPUs, CPUsPerNode: r.CPUs, MemPerNode: r.MemMB,
		PortBase: r.PortBase, Priority: s.Priority, Preempt: s.Preempt, JobSubmit: s.JobSubmit,
		PluginDir:    filepath.Join(tree, "plugins"),
		LachesisYAML: s.YAML, ExtraConf: s.Extra, Cgroups: r.Cgroups, ShardsPerGPU: r.ShardsPerGPU,
	})
	if err != nil {
		if c != nil {
			fmt.Fprintln(r.Out, c.Logs())
			c.Down() //nolint:errcheck
		}
		return nil, err
	}
	defer c.Down() //nolint:errcheck // the demo's result does not depend on it
	if s.Start != nil {
		stop, err := s.Start(ctx, c)
		if err != nil {
			return nil, err
		}
		defer stop()
	}

	ckptDir := filepath.Join(r.Dir, "ckpt")
	os.RemoveAll(ckptDir)
	if err := os.MkdirAll(ckptDir, 0o755); err != nil {
		return nil, err
	}
	train := filepath.Join(r.Root, "scripts", "demo-train.sh")
	out := make([]Outcome, len(jobs))
	byID := map[uint32]int{}
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return jobs[order[a]].Arrival < jobs[order[b]].Arrival })

	start := time.Now()
	next, done := 0, 0
	lastLine := time.Time{}
	for done < len(jobs) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		now := time.Since(start)
		for next < len(order) && jobs[order[next]].Arrival <= now {
			j := jobs[order[next]]
			ckpt := filepath.Join(ckptDir, j.Name)
			speeds := ""
			if s.Speeds != nil {
				speeds = s.Speeds(j)
			}
			args := []string{"-J", j.Name, "-N1", "--requeue", "--output=/dev/null"}
			if s.SubmitArgs != nil {
				args = append(args, s.SubmitArgs(j)...)
			}
			if s.Command != nil {
				args = append(args, s.Command(j, ckpt)...)
			} else {
				args = append(args, "--gpus="+strconv.Itoa(j.GPUs),
					"--wrap", fmt.Sprintf("bash %s %s %d %q", train, ckpt, int(j.Work.Seconds()), speeds))
			}
			id, err := c.Submit(args...)
			if err != nil {
				return nil, err
			}
			out[order[next]] = Outcome{Job: j, ID: id, Submit: time.Now()}
			byID[id] = order[next]
			next++
		}
		states, err := c.Jobs()
		if err != nil {
			return nil, err
		}
		var prios map[uint32]slurmcluster.Prio
		if s.ShowQueues {
			prios, _ = c.Priorities() // a failed read only blanks the columns
		}
		done = 0
		for id, i := range byID {
			if !out[i].End.IsZero() {
				// Counted once seen ended: slurmctld forgets a job
				// MinJobAge (300 s) after its end, and a run can
				// outlast that.
				done++
				continue
			}
			st := states[id]
			if st.State == "RUNNING" && out[i].CPUsPerGPU == 0 {
				if d, err := c.ShowJob(id); err == nil {
					n, _ := strconv.Atoi(d.Fields["NumCPUs"])
					out[i].CPUsPerGPU = n / max(out[i].Job.GPUs, 1)
				}
			}
			if st.State == "COMPLETED" || st.State == "FAILED" || st.State == "CANCELLED" || st.State == "TIMEOUT" {
				if out[i].End.IsZero() {
					d, err := c.ShowJob(id)
					if err == nil && !d.EndTime.IsZero() {
						out[i].End = d.EndTime
						out[i].Restarts = d.Restarts
					} else {
						out[i].End = time.Now()
					}
				}
				done++
			}
		}
		if s.Sample != nil {
			s.Sample(out, states)
		}
		if r.Live {
			r.drawLive(s.Label, now, jobs, out, states, prios, byID)
		} else if time.Since(lastLine) >= 10*time.Second {
			r.printLine(s.Label, now, out, states, prios, byID)
			lastLine = time.Now()
		}
		time.Sleep(r.PollEvery)
	}
	for i := range out { // restart counts of jobs still known to Slurm
		if d, err := c.ShowJob(out[i].ID); err == nil {
			out[i].Restarts = d.Restarts
		}
	}
	if r.Finished != nil {
		if err := r.Finished(c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *Runner) printLine(label string, now time.Duration, out []Outcome,
	states map[uint32]slurmcluster.Job, prios map[uint32]slurmcluster.Prio, byID map[uint32]int) {
	var run, pend []string
	for _, o := range out {
		if o.ID == 0 {
			continue
		}
		st := states[o.ID].State
		tag := o.Job.Name
		if p, ok := prios[o.ID]; ok && p.ID != 0 {
			tag = fmt.Sprintf("%s(Q%d,%dGs)", o.Job.Name, p.Queue, p.Service)
		}
		switch st {
		case "RUNNING":
			run = append(run, tag)
		case "PENDING":
			pend = append(pend, tag)
		}
	}
	fmt.Fprintf(r.Out, "[%s t=%3.0fs] running: %s | waiting: %s\n", label, now.Seconds(),
		strings.Join(run, " "), strings.Join(pend, " "))
}

func (r *Runner) drawLive(label string, now time.Duration, jobs []Job, out []Outcome,
	states map[uint32]slurmcluster.Job, prios map[uint32]slurmcluster.Prio, byID map[uint32]int) {
	var b strings.Builder
	b.WriteString("\033[H\033[2J")
	fmt.Fprintf(&b, "Lachesis demo — %s — t=%.0fs   (queue 0 is the highest; service = GPUs x seconds run)\n\n", label, now.Seconds())
	fmt.Fprintf(&b, "%-8s %-9s %4s %-10s %5s %9s %11s %8s\n", "JOBID", "NAME", "GPUS", "STATE", "QUEUE", "SERVICE", "PRIORITY", "RESTARTS")
	for _, o := range out {
		if o.ID == 0 {
			continue
		}
		st := states[o.ID]
		q, svc := "-", "-"
		if p, ok := prios[o.ID]; ok && p.ID != 0 {
			q, svc = strconv.FormatInt(p.Queue, 10), strconv.FormatInt(p.Service, 10)
		}
		state := st.State
		if state == "" {
			state = "DONE"
		}
		fmt.Fprintf(&b, "%-8d %-9s %4d %-10s %5s %9s %11d %8s\n", o.ID, o.Job.Name, o.Job.GPUs, state, q, svc, st.Priority, restartsOf(o))
	}
	fmt.Fprint(r.Out, b.String())
}

func restartsOf(o Outcome) string {
	if o.End.IsZero() {
		return ""
	}
	return strconv.Itoa(o.Restarts)
}
