package slurmcluster

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Job is one row of squeue.
type Job struct {
	ID       uint32
	Name     string
	State    string // RUNNING, PENDING, COMPLETED, ...
	Priority uint32
	Reason   string
}

// Jobs lists every job slurmctld still holds, finished ones included, by
// job id (%A: a job array's task by its own id, not as 12_3; the record of
// its tasks still pending by the array's).
func (c *Cluster) Jobs() (map[uint32]Job, error) {
	out, err := c.Run("squeue", "-h", "-a", "-t", "all", "-o", "%A|%j|%T|%Q|%r")
	if err != nil {
		return nil, err
	}
	jobs := map[uint32]Job{}
	for _, line := range nonEmptyLines(out) {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			return nil, fmt.Errorf("%w: squeue line %q", ErrCluster, line)
		}
		id, err1 := strconv.ParseUint(f[0], 10, 32)
		prio, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%w: squeue line %q", ErrCluster, line)
		}
		jobs[uint32(id)] = Job{ID: uint32(id), Name: f[1], State: f[2], Priority: uint32(prio), Reason: f[4]}
	}
	return jobs, nil
}

// Prio is one row of sprio, in Lachesis's reading of its columns.
type Prio struct {
	ID       uint32
	Priority int64
	Site     int64 // Tiresias component less Queue, Service and FairShare
	Queue    int64 // sprio's ASSOC column
	Service  int64 // sprio's JOBSIZE column: attained GPU-seconds
	Age      int64
	Nice     int64
	// FairShare is sprio's FAIRSHARE column: the account's fair-share
	// factor x 1000 (under 500: the account is over its share).
	FairShare int64
}

// Priorities runs sprio over pending and running jobs.
func (c *Cluster) Priorities() (map[uint32]Prio, error) {
	out, err := c.Run("sprio", "-h", "-o", "%i|%Y|%S|%B|%J|%A|%N|%F")
	if err != nil {
		return nil, err
	}
	rows := map[uint32]Prio{}
	for _, line := range nonEmptyLines(out) {
		f := strings.Split(strings.ReplaceAll(line, " ", ""), "|")
		if len(f) != 8 {
			return nil, fmt.Errorf("%w: sprio line %q", ErrCluster, line)
		}
		var v [8]int64
		for i, s := range f {
			n, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: sprio line %q: %v", ErrCluster, line, err)
			}
			v[i] = int64(n)
		}
		rows[uint32(v[0])] = Prio{ID: uint32(v[0]), Priority: v[1], Site: v[2], Queue: v[3], Service: v[4], Age: v[5], Nice: v[6], FairShare: v[7]}
	}
	return rows, nil
}

// JobDetail is what `scontrol show job` says about one job.
type JobDetail struct {
	State      string
	Restarts   int
	SubmitTime time.Time
	StartTime  time.Time
	EndTime    time.Time
	// AllocTRES is the job's allocated TRES ("cpu=2,mem=4000M,node=1,
	// billing=2,gres/gpu=2"): scontrol prints it as AllocTRES from Slurm
	// 23.02 (beside ReqTRES), as TRES in 22.05.
	AllocTRES string
	Fields    map[string]string
}

// freeTextKeys are the `scontrol show job` fields whose values may hold
// spaces; scontrol prints each on a line of its own.
var freeTextKeys = []string{"AdminComment=", "Comment=", "Command=", "WorkDir=", "StdErr=", "StdIn=", "StdOut=", "SystemComment="}

// ShowJob parses `scontrol show job ID` (the multi-line form, in which
// free-text fields stand alone on their lines).
func (c *Cluster) ShowJob(id uint32) (JobDetail, error) {
	out, err := c.Run("scontrol", "show", "job", strconv.FormatUint(uint64(id), 10))
	if err != nil {
		return JobDetail{}, err
	}
	return jobDetail(out), nil
}

// jobDetail reads one job's `scontrol show job` output.
func jobDetail(out string) JobDetail {
	d := JobDetail{Fields: parseShowJob(out)}
	d.State = d.Fields["JobState"]
	d.Restarts, _ = strconv.Atoi(d.Fields["Restarts"])
	d.SubmitTime = slurmTime(d.Fields["SubmitTime"])
	d.StartTime = slurmTime(d.Fields["StartTime"])
	d.EndTime = slurmTime(d.Fields["EndTime"])
	d.AllocTRES = d.Fields["AllocTRES"]
	if _, ok := d.Fields["AllocTRES"]; !ok {
		d.AllocTRES = d.Fields["TRES"]
	}
	return d
}

func parseShowJob(out string) map[string]string {
	fields := map[string]string{}
lines:
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		for _, k := range freeTextKeys {
			if strings.HasPrefix(line, k) {
				fields[strings.TrimSuffix(k, "=")] = strings.TrimSpace(line[len(k):])
				continue lines
			}
		}
		for _, kv := range strings.Fields(line) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				fields[k] = v
			}
		}
	}
	return fields
}

func slurmTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
