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
	Work    time.Duration // run time at the GPU-proportional share's speed
	Model   string        // optional; its speed depends on its CPUs (Models)
	// The sharing workload's (ParseSharingWorkload): the share of one GPU
	// the job is given when sharing is on (0: its GPUs, whole), its class,
	// and the utilisation its GPU step drives when it runs alone.
	Share         float64
	Opportunistic bool
	UtilPct       float64
}

// workloadRows reads a workload file's CSV rows ('#' comments skipped,
// rows of any width): the one reader of every demo part's workload.
func workloadRows(r io.Reader) ([][]string, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWorkload, err)
	}
	return rows, nil
}

// ParseWorkload reads "name,arrival_s,gpus,work_s[,model]" lines ('#'
// comments and one header line allowed).
func ParseWorkload(r io.Reader) ([]Job, error) {
	rows, err := workloadRows(r)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for i, row := range rows {
		if i == 0 && row[0] == "name" {
			continue
		}
		if len(row) != 4 && len(row) != 5 {
			return nil, fmt.Errorf("%w: line %d has %d fields, want 4 or 5", ErrWorkload, i+1, len(row))
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
		if len(row) == 5 {
			jobs[len(jobs)-1].Model = row[4]
		}
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: no jobs", ErrWorkload)
	}
	return jobs, nil
}

// Model is a demo model: how its speed depends on CPUs per GPU, and the
// profile Lachesis is given for it.
type Model struct {
	Name      string
	Speeds    string // "cpus:speed,..." relative to the proportional share
	BestCPUs  int    // best-case demand per GPU
	BestMemGB float64
	Kind      string
}

// ParseModels reads "model,kind,best_cpus,best_mem_gb,speeds" lines.
func ParseModels(r io.Reader) (map[string]Model, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 5
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%w: models: %v", ErrWorkload, err)
	}
	models := map[string]Model{}
	for i, row := range rows {
		if i == 0 && row[0] == "model" {
			continue
		}
		cpus, err1 := strconv.Atoi(row[2])
		mem, err2 := strconv.ParseFloat(row[3], 64)
		if err := errors.Join(err1, err2); err != nil || cpus < 1 || mem <= 0 {
			return nil, fmt.Errorf("%w: models line %d %q", ErrWorkload, i+1, strings.Join(row, ","))
		}
		models[row[0]] = Model{Name: row[0], Kind: row[1], BestCPUs: cpus, BestMemGB: mem, Speeds: row[4]}
	}
	return models, nil
}
