package gres

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("malformed gres request")

// MaxCount bounds a single count; anything larger is an error, not a job.
const MaxCount = 1 << 20

// GPUs returns the number of GPUs a comma-separated TRES request string asks
// for, summed over every gpu entry (typed or not). Entries naming other
// resources are ignored. An empty string is 0 GPUs.
//
// Accepted entry forms: "gres:gpu", "gres:gpu:N", "gres:gpu:TYPE:N",
// "gres/gpu", "gres/gpu:TYPE", "gres/gpu=N", "gres/gpu:TYPE=N", "gpu:N" and
// "gpu:TYPE:N" (the last two as a user would type them after --gres).
func GPUs(s string) (uint64, error) {
	var total uint64
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	for _, entry := range strings.Split(s, ",") {
		n, isGPU, err := parseEntry(strings.TrimSpace(entry))
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %v", ErrSyntax, entry, err)
		}
		if isGPU {
			total += n
			if total > MaxCount {
				return 0, fmt.Errorf("%w: %q: more than %d GPUs", ErrSyntax, s, MaxCount)
			}
		}
	}
	return total, nil
}

func parseEntry(e string) (count uint64, isGPU bool, err error) {
	if e == "" {
		return 0, false, errors.New("empty entry")
	}
	// "gres/gpu:a100=2" (TRES form): split the count off at '='.
	countStr := ""
	if i := strings.IndexByte(e, '='); i >= 0 {
		e, countStr = e[:i], e[i+1:]
	}
	e = strings.TrimPrefix(e, "gres:")
	e = strings.TrimPrefix(e, "gres/")
	parts := strings.Split(e, ":")
	if parts[0] != "gpu" {
		return 0, false, nil
	}
	switch {
	case countStr != "":
		if len(parts) > 2 {
			return 0, true, errors.New("too many fields")
		}
	case len(parts) == 1:
		countStr = "1"
	case len(parts) == 2:
		// "gpu:N" or "gpu:TYPE" (one GPU of that type). Type names
		// start with a letter, so anything else is meant as a count.
		if c := parts[1]; c != "" && (c[0] < 'a' || c[0] > 'z') && (c[0] < 'A' || c[0] > 'Z') {
			countStr = c
		} else {
			countStr = "1"
		}
	case len(parts) == 3:
		countStr = parts[2]
	default:
		return 0, true, errors.New("too many fields")
	}
	for _, p := range parts[1:] {
		if p == "" {
			return 0, true, errors.New("empty field")
		}
	}
	n, err := strconv.ParseUint(countStr, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("count %q is not a whole number", countStr)
	}
	if n > MaxCount {
		return 0, true, fmt.Errorf("count %d is more than %d", n, MaxCount)
	}
	return n, true, nil
}

// Request is a job's GPU request as Slurm holds it.
type Request struct {
	PerJob, PerNode, PerSocket, PerTask string
	Nodes, Tasks                        uint32
}

// Total is the job's whole GPU count. Per-socket requests are counted once
// per node: slurmctld does not know the socket count before allocation.
func (r Request) Total() (uint64, error) {
	nodes := max(uint64(r.Nodes), 1)
	tasks := max(uint64(r.Tasks), 1)
	var total uint64
	for _, f := range []struct {
		s    string
		mult uint64
	}{{r.PerJob, 1}, {r.PerNode, nodes}, {r.PerSocket, nodes}, {r.PerTask, tasks}} {
		n, err := GPUs(f.s)
		if err != nil {
			return 0, err
		}
		total += n * f.mult
	}
	return total, nil
}
