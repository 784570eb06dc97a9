package demo

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ErrWorkload is wrapped by workload parse errors.
var ErrWorkload = errors.New("demo workload")

// Job is one line of the workload file.
type Job struct {
	Name    string
	Arrival time.Duration
	GPUs    int
	Work    time.Duration
}

// ParseWorkload reads "name,arrival_s,gpus,work_s" lines ('#' comments and
// one header line allowed).
func ParseWorkload(r io.Reader) ([]Job, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 4
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkload, err)
	}
	var jobs []Job
	for i, row := range rows {
		if i == 0 && row[0] == "name" {
			continue
		}
		arr, err1 := strconv.ParseFloat(row[1], 64)
		gpus, err2 := strconv.Atoi(row[2])
		work, err3 := strconv.ParseFloat(row[3], 64)
		if err := errors.Join(err1, err2, err3); err != nil || gpus < 1 || work <= 0 || arr < 0 {
			return nil, fmt.Errorf("%w: line %d %q: need name, arrival >= 0, gpus >= 1, work > 0", ErrWorkload, i+1, strings.Join(row, ","))
		}
		jobs = append(jobs, Job{
			Name:    row[0],
			Arrival: time.Duration(arr * float64(time.Second)),
			GPUs:    gpus,
			Work:    time.Duration(work * float64(time.Second)),
		})
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: no jobs", ErrWorkload)
	}
	return jobs, nil
}
