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
func GPUs(s string) (uint64, error) { return count(s, "gpu", false) }

// NodeGPUs returns the number of GPUs a node's gres string names (node_ptr->gres,
// scontrol's Gres=, sinfo's %G): the forms GPUs accepts, and also those
// slurmctld writes back once gres.conf gives the GPUs' cores (gres.c,
// _build_node_gres_str): a socket suffix "gpu:a100:4(S:0-1)" and a unit on
// the count ("shard:1K" for 1024), or the index suffix of the gres-used
// string ("gpu:tesla:2(IDX:0-1)", "(IDX:N/A)"). A suffix is checked, never
// skipped blind: anything but a bounded list of indexes and ranges is an error.
func NodeGPUs(s string) (uint64, error) { return count(s, "gpu", true) }

// Shards returns the number of gres/shard a node's comma-separated gres
// string names (e.g. "gpu:2,shard:8", "gpu:2(S:0),shard:8(S:0)"), in the
// forms NodeGPUs accepts with "shard" for "gpu".
func Shards(s string) (uint64, error) { return count(s, "shard", true) }

// AsksForGPUShare reports whether a job's comma-separated TRES request
// string (tres_per_job/node/socket/task) asks for a share of a GPU: an
// entry named exactly "shard" or "mps", the two shared gres Slurm 22.05
// knows (gres.c, _is_shared_name), in the forms GPUs accepts ("gres:mps",
// "gres:mps:100", "gres:shard:TYPE:2", "gres/mps=100", "mps:50"). A name
// that only contains one ("gres:myshard:1", a GPU type "mps2") is not a
// share. An entry with a count of 0 asks for nothing; one whose count
// cannot be read still counts (slurmctld took it, so it may hold a share).
// The names are compared before anything is parsed, so a string without
// such an entry costs no allocation: the pass asks this of every job
// without GPUs.
func AsksForGPUShare(s string) bool {
	for s != "" {
		var e string
		e, s, _ = strings.Cut(s, ",")
		e = strings.TrimSpace(e)
		name := trimPrefix(e)
		if i := strings.IndexAny(name, ":="); i >= 0 {
			name = name[:i]
		}
		if name != "shard" && name != "mps" {
			continue
		}
		if n, _, err := parseEntry(e, name, false); err != nil || n > 0 {
			return true
		}
	}
	return false
}

// maxSuffix bounds a node entry's "(S:...)"/"(IDX:...)" suffix; slurmctld
// formats them into buffers of 256 and 64 bytes.
const maxSuffix = 256

// count sums the entries of s naming gres name; node allows the suffixes of
// a node's gres string (NodeGPUs).
func count(s, name string, node bool) (uint64, error) {
	var total uint64
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	entries := strings.Split(s, ",")
	if node {
		var err error
		if entries, err = splitNodeEntries(s); err != nil {
			return 0, fmt.Errorf("%w: %q: %v", ErrSyntax, s, err)
		}
	}
	for _, entry := range entries {
		e := strings.TrimSpace(entry)
		if node {
			var err error
			if e, err = trimNodeSuffix(e); err != nil {
				return 0, fmt.Errorf("%w: %q: %v", ErrSyntax, entry, err)
			}
		}
		n, isGPU, err := parseEntry(e, name, node)
		if err != nil {
			return 0, fmt.Errorf("%w: %q: %v", ErrSyntax, entry, err)
		}
		if isGPU {
			total += n
			if total > MaxCount {
				return 0, fmt.Errorf("%w: %q: more than %d of %s", ErrSyntax, s, MaxCount, name)
			}
		}
	}
	return total, nil
}

// splitNodeEntries splits a node's gres string at the commas outside
// parentheses: a socket list may hold commas ("gpu:4(S:0,2)").
// Parentheses do not nest.
func splitNodeEntries(s string) ([]string, error) {
	var out []string
	start, open := 0, -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			if open >= 0 {
				return nil, errors.New("nested parenthesis")
			}
			open = i
		case ')':
			if open < 0 {
				return nil, errors.New("unopened parenthesis")
			}
			open = -1
		case ',':
			if open < 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if open >= 0 {
		return nil, errors.New("unclosed parenthesis")
	}
	return append(out, s[start:]), nil
}

// trimNodeSuffix drops a node entry's closing "(S:LIST)" or "(IDX:LIST)",
// after checking it: LIST is indexes and index ranges ("0", "0-1", "0,2-3"),
// or "N/A" after IDX. An entry with no suffix is returned as is.
func trimNodeSuffix(e string) (string, error) {
	i := strings.IndexByte(e, '(')
	if i < 0 {
		if strings.IndexByte(e, ')') >= 0 {
			return "", errors.New("unopened parenthesis")
		}
		return e, nil
	}
	suffix := e[i:]
	if len(suffix) > maxSuffix {
		return "", fmt.Errorf("suffix longer than %d bytes", maxSuffix)
	}
	if !strings.HasSuffix(suffix, ")") || strings.Count(suffix, "(") != 1 || strings.Count(suffix, ")") != 1 {
		return "", errors.New("text after the suffix")
	}
	body := suffix[1 : len(suffix)-1]
	list, ok := strings.CutPrefix(body, "S:")
	if !ok {
		if list, ok = strings.CutPrefix(body, "IDX:"); !ok {
			return "", fmt.Errorf("suffix %q is neither (S:...) nor (IDX:...)", suffix)
		}
		if list == "N/A" {
			return e[:i], nil
		}
	}
	if !indexList(list) {
		return "", fmt.Errorf("suffix %q is not a list of indexes", suffix)
	}
	return e[:i], nil
}

// indexList reports whether l is a Slurm bitmap list: comma-separated
// indexes and ranges "A-B" with A <= B.
func indexList(l string) bool {
	if l == "" {
		return false
	}
	for _, r := range strings.Split(l, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return false
		}
		if isRange {
			b, err := strconv.ParseUint(hi, 10, 32)
			if err != nil || b < a {
				return false
			}
		}
	}
	return true
}

// unitMult is the multiplier of a count's unit as slurmctld writes it into
// a node's gres string (gres.c, _get_suffix).
var unitMult = map[byte]uint64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40, 'P': 1 << 50}

func parseEntry(e, name string, node bool) (count uint64, isGPU bool, err error) {
	if e == "" {
		return 0, false, errors.New("empty entry")
	}
	// "gres/gpu:a100=2" (TRES form): split the count off at '='.
	countStr := ""
	if i := strings.IndexByte(e, '='); i >= 0 {
		e, countStr = e[:i], e[i+1:]
	}
	parts := strings.Split(trimPrefix(e), ":")
	if parts[0] != name {
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
	mult := uint64(1)
	if m, ok := unitMult[countStr[len(countStr)-1]]; node && ok && len(countStr) > 1 {
		countStr, mult = countStr[:len(countStr)-1], m
	}
	n, err := strconv.ParseUint(countStr, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("count %q is not a whole number", countStr)
	}
	if n > MaxCount/mult {
		return 0, true, fmt.Errorf("count %d×%d is more than %d", n, mult, MaxCount)
	}
	return n * mult, true, nil
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

// GPUsPerNode is how many GPUs the job needs on one node: its per-node
// request, else total (its whole count) spread evenly over its nodes, so
// a job without a node count needs all of them on one (Slurm packs a small
// job onto one node).
func (r Request) GPUsPerNode(total uint64) uint64 {
	if n, err := GPUs(r.PerNode); err == nil && n > 0 {
		return n
	}
	nodes := max(uint64(r.Nodes), 1)
	return (total + nodes - 1) / nodes
}

// Spreadable reports whether Slurm may spread the job's GPUs over as many
// nodes as it likes: they are asked per job, with no per-node count and no
// node count (-N). A --nodes=1-MAX cap, if any, is the caller's business.
func (r Request) Spreadable() bool {
	n, err := GPUs(r.PerNode)
	return (err != nil || n == 0) && r.Nodes == 0 && r.PerJob != ""
}

// Typed reports whether any gpu entry of the request names a GPU type
// ("gres:gpu:a100:2", "gres/gpu:v100", "gpu:a100"). In the two-field forms
// "gpu:X" and "gpu:X=N", X is a type unless it starts with a digit.
func (r Request) Typed() bool {
	for _, s := range []string{r.PerJob, r.PerNode, r.PerSocket, r.PerTask} {
		for _, e := range strings.Split(s, ",") {
			e = strings.TrimSpace(e)
			if i := strings.IndexByte(e, '='); i >= 0 {
				e = e[:i]
			}
			p := strings.Split(trimPrefix(e), ":")
			if p[0] != "gpu" || len(p) < 2 {
				continue
			}
			if len(p) >= 3 {
				return true
			}
			if c := p[1]; c != "" && (c[0] < '0' || c[0] > '9') {
				return true
			}
		}
	}
	return false
}

// CPUsPerGPU reads a job's cpus_per_tres (--cpus-per-gpu, "gres:gpu:N").
// ok is false when the string has no gpu entry.
func CPUsPerGPU(s string) (n uint64, ok bool, err error) { return perGPU(s, false) }

// MemMBPerGPU reads a job's mem_per_tres (--mem-per-gpu, "gres:gpu:N" in
// MB, or with an M, G or T suffix). ok is false when the string has no gpu
// entry.
func MemMBPerGPU(s string) (mb uint64, ok bool, err error) { return perGPU(s, true) }

// perGPU is the one rule for cpus_per_tres and mem_per_tres: the first gpu
// entry ("gres:gpu:N", "gres/gpu:N", "gpu:N", or with a type before N)
// decides; N is a whole number from 1 to 2^32-1, and only memory takes a
// unit suffix. Anything else in that entry is an error: a malformed request
// is refused by sizing, and placement treats it as no request.
func perGPU(s string, mem bool) (uint64, bool, error) {
	what := "cpus"
	if mem {
		what = "mem"
	}
	if strings.TrimSpace(s) == "" {
		return 0, false, nil
	}
	for _, entry := range strings.Split(s, ",") {
		f := strings.Split(trimPrefix(strings.TrimSpace(entry)), ":")
		if f[0] != "gpu" {
			continue
		}
		if len(f) < 2 || len(f) > 3 {
			return 0, false, fmt.Errorf("%w: %s-per-gpu %q", ErrSyntax, what, s)
		}
		v, mult := f[len(f)-1], uint64(1)
		if mem && v != "" {
			switch v[len(v)-1] {
			case 'M', 'm':
				v = v[:len(v)-1]
			case 'G', 'g':
				v, mult = v[:len(v)-1], 1024
			case 'T', 't':
				v, mult = v[:len(v)-1], 1024*1024
			}
		}
		x, err := strconv.ParseUint(v, 10, 32)
		if err != nil || x == 0 {
			return 0, false, fmt.Errorf("%w: %s-per-gpu %q is not a positive whole number", ErrSyntax, what, s)
		}
		return x * mult, true, nil
	}
	return 0, false, nil
}

// trimPrefix drops the "gres:" or "gres/" in front of an entry.
func trimPrefix(e string) string {
	return strings.TrimPrefix(strings.TrimPrefix(e, "gres:"), "gres/")
}
