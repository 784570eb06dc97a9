package slurmcmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The verbs Lachesis uses. Each builds its command from typed arguments
// (a job id is a number; a node name or host list that could read as an
// option, or holds a space or control character, is refused before
// anything runs) and reads only the fields it asked for.

// ErrBadArgument: a node name, host list or GRES string Slurm would not
// have printed.
var ErrBadArgument = errors.New("not a node name, host list or GRES string")

// ErrJobNotPending: slurmctld refused to edit a job because it no longer
// waits (it started meanwhile).
var ErrJobNotPending = errors.New("the job is no longer pending")

func jobID(job uint32) string { return strconv.FormatUint(uint64(job), 10) }

// checkNames refuses what cannot be a node name or host list: empty, a
// leading '-' (the command would read it as an option), spaces and
// control characters.
func checkNames(s string) error {
	if s == "" || s[0] == '-' {
		return fmt.Errorf("%w: %.64q", ErrBadArgument, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return fmt.Errorf("%w: %.64q", ErrBadArgument, s)
		}
	}
	return nil
}

// ErrNotRequeueable: slurmctld refused a requeue that can never succeed:
// the job is not a batch job (srun, salloc: ESLURM_BATCH_ONLY) or may not
// be requeued (--no-requeue, or the cluster's JobRequeue=0 without
// --requeue: ESLURM_DISABLED).
var ErrNotRequeueable = errors.New("the job cannot be requeued")

// notRequeueable are the messages of slurm_strerror that scontrol prints
// for ESLURM_DISABLED and ESLURM_BATCH_ONLY (the same in 22.05 and 24.11).
var notRequeueable = []string{"Requested operation is presently disabled", "Only batch jobs are accepted or processed"}

// Requeue requeues a running job (scontrol requeue): slurmctld's user may
// requeue any job. scontrol exits non-zero when slurmctld refuses; a job
// that can never be requeued wraps ErrNotRequeueable.
func (r Runner) Requeue(ctx context.Context, job uint32) error {
	_, err := r.Run(ctx, "scontrol", "requeue", jobID(job))
	var exit *ExitError
	if errors.As(err, &exit) {
		for _, m := range notRequeueable {
			if strings.Contains(exit.Stderr, m) {
				return fmt.Errorf("%w: %w", ErrNotRequeueable, err)
			}
		}
	}
	return err
}

// Cancel ends a job (scancel): slurmctld's user may cancel any job.
func (r Runner) Cancel(ctx context.Context, job uint32) error {
	_, err := r.Run(ctx, "scancel", jobID(job))
	return err
}

// notPending are the states squeue prints for a job that Slurm never
// edits the ExcNodeList of. A job just requeued shows as COMPLETING or
// REQUEUED while Slurm already counts it pending (and edits it), so those
// are not among them.
var notPending = map[string]bool{
	"": true, "RUNNING": true, "SUSPENDED": true, "STOPPED": true, "COMPLETED": true, "CANCELLED": true,
	"FAILED": true, "TIMEOUT": true, "NODE_FAIL": true, "PREEMPTED": true, "BOOT_FAIL": true,
	"DEADLINE": true, "OUT_OF_MEMORY": true, "SPECIAL_EXIT": true,
}

// ExcNodeList is the job's ExcNodeList as Slurm holds it ("" for none, or
// for a job that is not pending) and whether the job is pending, the only
// state slurmctld edits it in. It reads squeue's %T and %x: two fields no
// user text can hold (a node list has no spaces), unlike `scontrol show
// job`, whose one-line form has the job's name and comment unquoted beside
// them. More than one line (more than one job) is refused.
func (r Runner) ExcNodeList(ctx context.Context, job uint32) (list string, pending bool, err error) {
	out, err := r.Run(ctx, "squeue", "-h", "-j", jobID(job), "-o", "%T %x")
	if err != nil {
		return "", false, err
	}
	out = strings.TrimSpace(out)
	if strings.ContainsAny(out, "\n\r") {
		return "", false, fmt.Errorf("squeue's answer about job %d has more than one line: %.64q", job, out)
	}
	state, list, _ := strings.Cut(out, " ")
	if notPending[state] {
		return "", false, nil
	}
	// Slurm keeps a submitted --exclude as the user wrote it, and reads
	// spaces in a host list as commas ("n1, n2" is n1,n2): the list is
	// read the same way, so it is one token Lachesis can write back.
	list = strings.Join(strings.FieldsFunc(list, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }), ",")
	if list = strings.TrimSpace(list); list != "" {
		if err := checkNames(list); err != nil {
			return "", false, fmt.Errorf("squeue's ExcNodeList of job %d: %w", job, err)
		}
	}
	return list, true, nil
}

// SetExcNodeList replaces the job's ExcNodeList ("" clears it) with
// scontrol update. A refusal because the job no longer waits wraps
// ErrJobNotPending.
func (r Runner) SetExcNodeList(ctx context.Context, job uint32, list string) error {
	if list != "" {
		if err := checkNames(list); err != nil {
			return err
		}
	}
	_, err := r.Run(ctx, "scontrol", "update", "JobId="+jobID(job), "ExcNodeList="+list)
	var exit *ExitError
	if errors.As(err, &exit) && strings.Contains(exit.Stderr, "pending") {
		return fmt.Errorf("%w: %w", ErrJobNotPending, err)
	}
	return err
}

// Hostnames expands a Slurm host list ("n[1-3],m1") into its node names
// with scontrol show hostnames.
func (r Runner) Hostnames(ctx context.Context, list string) ([]string, error) {
	if err := checkNames(list); err != nil {
		return nil, err
	}
	out, err := r.Run(ctx, "scontrol", "show", "hostnames", list)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// RunningJobOwner is the uid of job if it runs on node; running is false
// when it does not (squeue answers nothing).
func (r Runner) RunningJobOwner(ctx context.Context, job uint32, node string) (uid uint32, running bool, err error) {
	if err := checkNames(node); err != nil {
		return 0, false, err
	}
	out, err := r.Run(ctx, "squeue", "--noheader", "--jobs", jobID(job),
		"--nodelist", node, "--states", "RUNNING", "--format", "%U")
	if err != nil {
		return 0, false, err
	}
	return parseOwner(out, job)
}

// parseOwner reads squeue's "%U" answer: one uid, or nothing when the job
// does not run there.
func parseOwner(out string, job uint32) (uint32, bool, error) {
	f := strings.Fields(out)
	if len(f) == 0 {
		return 0, false, nil
	}
	uid, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil || len(f) != 1 {
		return 0, false, fmt.Errorf("squeue's answer about job %d is not a uid: %.64q", job, out)
	}
	return uint32(uid), true, nil
}

// NodeGres is node's configured GRES as scontrol prints it
// ("gpu:a100:4(S:0-1),shard:8"), "" when it has none.
func (r Runner) NodeGres(ctx context.Context, node string) (string, error) {
	if err := checkNames(node); err != nil {
		return "", err
	}
	out, err := r.Run(ctx, "scontrol", "show", "node", node, "--oneliner")
	if err != nil {
		return "", err
	}
	gres := parseNodeGres(out)
	if gres != "" {
		if err := checkNames(gres); err != nil {
			return "", fmt.Errorf("scontrol's Gres of node %s: %w", node, err)
		}
	}
	return gres, nil
}

// parseNodeGres reads the Gres= field of a node's one-line record; it
// comes before every field an admin or slurmd writes free text into
// (Reason=, Comment=, OS=), and the first one is taken.
func parseNodeGres(out string) string {
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "Gres="); ok {
			if v == "(null)" {
				return ""
			}
			return v
		}
	}
	return ""
}

// JobGPUFigures is what Slurm's own accounting measured of one job's GPUs
// (Slurm 23.02+: the TRES gres/gpuutil and gres/gpumem, gathered from NVML
// by slurmd's gpu/nvml plugin for every step): the highest over its steps
// of the average utilisation (percent, summed over the job's processes,
// so over 100 on several GPUs) and of the peak memory (bytes). Each is
// NaN when no step of the job reported it: accounting does not list the
// TRES (AccountingStorageTRES), or the GPUs are not NVML-backed.
type JobGPUFigures struct {
	UtilPct  float64
	MemBytes float64
}

// MaxSacctJobs bounds the jobs of one JobGPUFigures call (one sacct).
const MaxSacctJobs = 500

// JobGPUFigures asks sacct for jobs' GPU figures (at most MaxSacctJobs):
// every step's TRESUsageInAve and TRESUsageInMax, raw (--noconvert). A
// job sacct does not know is absent from the answer.
func (r Runner) JobGPUFigures(ctx context.Context, jobs []uint32) (map[uint32]JobGPUFigures, error) {
	if len(jobs) == 0 {
		return map[uint32]JobGPUFigures{}, nil
	}
	if len(jobs) > MaxSacctJobs {
		return nil, fmt.Errorf("%w: %d jobs in one sacct (at most %d)", ErrBadArgument, len(jobs), MaxSacctJobs)
	}
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = jobID(j)
	}
	out, err := r.Run(ctx, "sacct", "--noheader", "--parsable2", "--noconvert", "--allusers",
		"--jobs", strings.Join(ids, ","), "--format", "JobID,TRESUsageInAve,TRESUsageInMax")
	if err != nil {
		return nil, err
	}
	return parseJobGPUFigures(out), nil
}

// parseJobGPUFigures reads sacct's lines "JOBID[.STEP]|AVE TRES|MAX TRES"
// (TRES as "cpu=…,gres/gpumem=123,gres/gpuutil=45"); a line it cannot
// read is skipped.
func parseJobGPUFigures(out string) map[uint32]JobGPUFigures {
	figs := map[uint32]JobGPUFigures{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) != 3 {
			continue
		}
		base, _, _ := strings.Cut(f[0], ".")
		base, _, _ = strings.Cut(base, "_") // an array task's line names the array
		id, err := strconv.ParseUint(base, 10, 32)
		if err != nil {
			continue
		}
		g, ok := figs[uint32(id)]
		if !ok {
			g = JobGPUFigures{UtilPct: nan(), MemBytes: nan()}
		}
		if v, ok := tresValue(f[1], "gres/gpuutil"); ok && !(v <= g.UtilPct) {
			g.UtilPct = v
		}
		if v, ok := tresValue(f[2], "gres/gpumem"); ok && !(v <= g.MemBytes) {
			g.MemBytes = v
		}
		figs[uint32(id)] = g
	}
	return figs
}

// tresValue is name's value in a TRES list ("cpu=1,gres/gpuutil=45").
func tresValue(list, name string) (float64, bool) {
	for _, kv := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k != name {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || x != x {
			return 0, false
		}
		return x, true
	}
	return 0, false
}

func nan() float64 { return math.NaN() }

// AccountDescription is one of slurmdbd's accounts and its Description
// (sacctmgr prints descriptions lower-cased, as it stores them).
type AccountDescription struct {
	Name, Description string
}

// Bounds of one AccountDescriptions: the accounts listed and sacctmgr's
// output. A description is MySQL text (up to 64 KiB), so the output bound
// is above the runner's default.
const (
	MaxAccountsListed   = 65536
	MaxAccountsOutput   = 8 << 20
	maxAccountNameBytes = 255 // slurmdbd's acct_table name is tinytext
)

// AccountDescriptions lists slurmdbd's accounts with their descriptions
// (`sacctmgr -nP show account format=Account,Description`). sacctmgr
// reads slurmdbd, so it fails where the cluster has none. Its output is
// "name|description" a line, unescaped: a description may hold '|'
// (the account's name never does, so the first one ends the name) and
// even a newline (a line without '|' continues the last description). An
// account listed twice, a name Slurm would not store, or more than
// MaxAccountsListed accounts is an error: the answer is then not trusted.
func (r Runner) AccountDescriptions(ctx context.Context) ([]AccountDescription, error) {
	if r.MaxOutput == 0 {
		r.MaxOutput = MaxAccountsOutput
	}
	out, err := r.Run(ctx, "sacctmgr", "--noheader", "--parsable2", "show", "account", "format=Account,Description")
	if err != nil {
		return nil, err
	}
	return parseAccountDescriptions(out)
}

func parseAccountDescriptions(out string) ([]AccountDescription, error) {
	var accts []AccountDescription
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		name, desc, ok := strings.Cut(line, "|")
		if !ok {
			if len(accts) == 0 {
				if strings.TrimSpace(line) == "" {
					continue // sacctmgr's answer when there are no accounts
				}
				return nil, fmt.Errorf("sacctmgr's account list starts with a line that names no account: %.64q", line)
			}
			accts[len(accts)-1].Description += "\n" + line
			continue
		}
		if !isAccountName(name) {
			return nil, fmt.Errorf("sacctmgr's account list: %.64q is not an account name", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("sacctmgr's account list names account %.64q twice", name)
		}
		if len(accts) == MaxAccountsListed {
			return nil, fmt.Errorf("sacctmgr lists more than %d accounts", MaxAccountsListed)
		}
		seen[name] = true
		accts = append(accts, AccountDescription{Name: name, Description: desc})
	}
	return accts, nil
}

// isAccountName says whether name is one slurmdbd would store: not
// empty, at most maxAccountNameBytes, no space or control character.
func isAccountName(name string) bool {
	return name != "" && len(name) <= maxAccountNameBytes && !strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// AccountParents maps each account that has an account association in
// cluster to its parent account, lower-cased as slurmdbd stores them
// (`sacctmgr -nP show assoc where cluster=CLUSTER
// format=Account,User,ParentName`; root's own parent is ""). sacctmgr lists
// the users' associations too, which name a user and no parent: they are
// skipped. Bounded as AccountDescriptions: the output, and at most
// MaxAccountsListed accounts; an account association listed twice, or a
// name Slurm would not store, is an error.
func (r Runner) AccountParents(ctx context.Context, cluster string) (map[string]string, error) {
	if !isAccountName(cluster) || strings.ContainsAny(cluster, "=,'\"") {
		return nil, fmt.Errorf("cluster name %.64q: not one sacctmgr can be asked about", cluster)
	}
	if r.MaxOutput == 0 {
		r.MaxOutput = MaxAccountsOutput
	}
	out, err := r.Run(ctx, "sacctmgr", "--noheader", "--parsable2", "show", "association", "where", "cluster="+cluster, "format=Account,User,ParentName")
	if err != nil {
		return nil, err
	}
	return parseAccountParents(out)
}

func parseAccountParents(out string) (map[string]string, error) {
	parents := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue // sacctmgr's answer when there are no associations
		}
		fields := strings.Split(line, "|")
		if len(fields) != 3 {
			return nil, fmt.Errorf("sacctmgr's association list: %.64q is not account|user|parent", line)
		}
		acct, user, parent := strings.ToLower(fields[0]), fields[1], strings.ToLower(fields[2])
		if user != "" {
			continue // a user's association: its account is the parent
		}
		if !isAccountName(acct) || (parent != "" && !isAccountName(parent)) {
			return nil, fmt.Errorf("sacctmgr's association list: %.64q is not an account and its parent", line)
		}
		if _, twice := parents[acct]; twice {
			return nil, fmt.Errorf("sacctmgr's association list names account %.64q twice", acct)
		}
		if len(parents) == MaxAccountsListed {
			return nil, fmt.Errorf("sacctmgr lists more than %d account associations", MaxAccountsListed)
		}
		parents[acct] = parent
	}
	return parents, nil
}
