package slurmcmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Leaf is one leaf of the network topology slurmctld schedules by: a
// topology/tree switch of level 0, or a topology/block block (Slurm 23.11
// and later), and the nodes under it.
type Leaf struct {
	Name  string
	Nodes []string
}

// Bounds on a topology: more is a broken topology.conf, not a cluster.
const (
	MaxTopologyLeaves = 4096
	MaxTopologyNodes  = 65536
	// maxLeafName bounds a switch or block name (Slurm's are short words).
	maxLeafName = 128
)

// ErrBadTopology: scontrol's topology answer is not one Lachesis reads.
var ErrBadTopology = errors.New("unreadable topology")

// rawLeaf is a leaf as scontrol prints it: its host list unexpanded.
type rawLeaf struct {
	name, nodes string
}

// Topology is the leaves of the topology slurmctld has, each with its
// nodes (host lists expanded by Slurm's own `scontrol show hostnames`),
// in scontrol's order; nil when slurmctld has none that groups nodes
// (topology/none on 22.05, topology/default on 24.11: scontrol prints
// nothing). A node listed under two leaves (Slurm warns and allows it) is
// kept under the first.
func (r Runner) Topology(ctx context.Context) ([]Leaf, error) {
	out, err := r.Run(ctx, "scontrol", "show", "topology")
	if err != nil {
		return nil, err
	}
	raw, err := parseTopology(out)
	if err != nil || len(raw) == 0 {
		return nil, err
	}
	leaves := make([]Leaf, 0, len(raw))
	seen, total := map[string]bool{}, 0
	for _, l := range raw {
		names := strings.Split(l.nodes, ",")
		if strings.ContainsAny(l.nodes, "[]") {
			if names, err = r.Hostnames(ctx, l.nodes); err != nil {
				return nil, fmt.Errorf("the nodes of %q: %w", l.name, err)
			}
		}
		leaf := Leaf{Name: l.name}
		for _, n := range names {
			if n == "" || seen[n] {
				continue
			}
			if total++; total > MaxTopologyNodes {
				return nil, fmt.Errorf("%w: more than %d nodes under its leaves", ErrBadTopology, MaxTopologyNodes)
			}
			if err := checkNames(n); err != nil || len(n) > maxLeafName {
				return nil, fmt.Errorf("%w: a node %.64q under %q", ErrBadTopology, n, l.name)
			}
			seen[n] = true
			leaf.Nodes = append(leaf.Nodes, n)
		}
		leaves = append(leaves, leaf)
	}
	return leaves, nil
}

// parseTopology reads `scontrol show topology`, the same on 22.05 and
// 24.11: topology/tree prints one line per switch, "SwitchName=S Level=L
// LinkSpeed=N Nodes=LIST" (a leaf, level 0) or "... Switches=LIST" (above
// the leaves); topology/block prints "BlockName=B BlockIndex=I Nodes=LIST
// BlockSize=N" per block and "AggregatedBlock=..." per aggregate of
// blocks. The leaves are kept, each with its host list unexpanded. A line
// of another shape, a repeated leaf or more leaves than the bound is an
// error: what a site's topology.conf says is not guessed at.
func parseTopology(out string) ([]rawLeaf, error) {
	var leaves []rawLeaf
	names := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := map[string]string{}
		var first string
		for i, kv := range strings.Fields(line) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("%w: %.80q is not KEY=VALUE", ErrBadTopology, kv)
			}
			if i == 0 {
				first = k
			}
			f[k] = v
		}
		var leaf rawLeaf
		switch first {
		case "SwitchName":
			level, err := strconv.ParseUint(f["Level"], 10, 16)
			if err != nil {
				return nil, fmt.Errorf("%w: switch %.64q has level %.16q", ErrBadTopology, f[first], f["Level"])
			}
			if level != 0 {
				continue // above the leaves
			}
			leaf = rawLeaf{name: f[first], nodes: f["Nodes"]}
		case "BlockName":
			leaf = rawLeaf{name: f[first], nodes: f["Nodes"]}
		case "AggregatedBlock":
			continue
		default:
			return nil, fmt.Errorf("%w: a line %.80q", ErrBadTopology, line)
		}
		if leaf.name == "" || len(leaf.name) > maxLeafName || checkNames(leaf.name) != nil {
			return nil, fmt.Errorf("%w: a leaf named %.64q", ErrBadTopology, leaf.name)
		}
		if names[leaf.name] {
			return nil, fmt.Errorf("%w: leaf %q listed twice", ErrBadTopology, leaf.name)
		}
		if leaf.nodes == "" || leaf.nodes == "(null)" || checkNames(leaf.nodes) != nil {
			return nil, fmt.Errorf("%w: leaf %q has nodes %.64q", ErrBadTopology, leaf.name, leaf.nodes)
		}
		if len(leaves) == MaxTopologyLeaves {
			return nil, fmt.Errorf("%w: more than %d leaves", ErrBadTopology, MaxTopologyLeaves)
		}
		names[leaf.name] = true
		leaves = append(leaves, leaf)
	}
	return leaves, nil
}
