package replay

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"
)

// Run is one uninterrupted run of a job on the cluster.
type Run struct {
	Start, End time.Time
	// Requeued: the run ended by preemption, not by the job's end.
	Requeued bool
}

// Record is what slurmctld's log says happened to one job.
type Record struct {
	ID     uint32
	Submit time.Time
	Runs   []Run
	End    time.Time // the final end; zero while the job has not ended
}

// Requeues is how often the job was preempted.
func (r Record) Requeues() int {
	n := 0
	for _, run := range r.Runs {
		if run.Requeued {
			n++
		}
	}
	return n
}

// The log lines the replay reads (slurmctld 22.05, SlurmctldDebug=info or
// more, LogTimeFormat's default iso8601_ms): submission, a start by the
// main scheduler or by backfill, a requeue by preemption, the job's end.
var (
	logStamp   = regexp.MustCompile(`^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] (.*)$`)
	logSubmit  = regexp.MustCompile(`^_slurm_rpc_submit_batch_job: JobId=(\d+) `)
	logStart   = regexp.MustCompile(`^(?:sched: Allocate JobId=(\d+) NodeList=|sched/backfill: _start_job: Started JobId=(\d+) |backfill: Started JobId=(\d+) )`)
	logPreempt = regexp.MustCompile(`^preempted JobId=(\d+) has been requeued`)
	logDone    = regexp.MustCompile(`^_job_complete: JobId=(\d+) done`)
)

// maxLogLine bounds one line of the log the reader accepts; longer lines
// are skipped (a job's name is in none of the lines read).
const maxLogLine = 64 << 10

// ReadControllerLog reads the records of the given jobs (all jobs when ids
// is nil) from slurmctld's log. Times are local, as slurmctld writes them.
func ReadControllerLog(r io.Reader, ids map[uint32]bool) (map[uint32]*Record, error) {
	recs := map[uint32]*Record{}
	get := func(s string) *Record {
		id64, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return nil
		}
		id := uint32(id64)
		if ids != nil && !ids[id] {
			return nil
		}
		if recs[id] == nil {
			recs[id] = &Record{ID: id}
		}
		return recs[id]
	}
	first := func(m []string) string {
		for _, s := range m[1:] {
			if s != "" {
				return s
			}
		}
		return ""
	}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: reading slurmctld's log: %w", ErrReplay, err)
		}
		m := logStamp.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("2006-01-02T15:04:05.999", m[1], time.Local)
		if err != nil {
			continue
		}
		msg := m[2]
		switch {
		case logSubmit.MatchString(msg):
			if rec := get(first(logSubmit.FindStringSubmatch(msg))); rec != nil && rec.Submit.IsZero() {
				rec.Submit = at
			}
		case logStart.MatchString(msg):
			if rec := get(first(logStart.FindStringSubmatch(msg))); rec != nil {
				rec.Runs = append(rec.Runs, Run{Start: at})
			}
		case logPreempt.MatchString(msg):
			if rec := get(first(logPreempt.FindStringSubmatch(msg))); rec != nil && len(rec.Runs) > 0 {
				last := &rec.Runs[len(rec.Runs)-1]
				if last.End.IsZero() {
					last.End, last.Requeued = at, true
				}
			}
		case logDone.MatchString(msg):
			if rec := get(first(logDone.FindStringSubmatch(msg))); rec != nil {
				rec.End = at
				if n := len(rec.Runs); n > 0 && rec.Runs[n-1].End.IsZero() {
					rec.Runs[n-1].End = at
				}
			}
		}
	}
	return recs, nil
}

// readLine returns the next line without its newline; lines longer than
// maxLogLine are skipped whole.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	skip := false
	for {
		part, isPrefix, err := br.ReadLine()
		if err != nil {
			if err == io.EOF && len(buf) > 0 && !skip {
				return string(buf), nil
			}
			return "", err
		}
		if !skip {
			buf = append(buf, part...)
			if len(buf) > maxLogLine {
				skip, buf = true, nil
			}
		}
		if !isPrefix {
			if skip {
				skip = false
				continue
			}
			return string(buf), nil
		}
	}
}
